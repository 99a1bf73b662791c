package main

import (
	"expvar"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/conveyor-dev/conveyor/internal/browserguard"
	"github.com/conveyor-dev/conveyor/server"
)

// serveDebug serves Go's pprof profiles, and the server's counters as
// expvar JSON (/debug/vars, key "conveyor"), on addr: a listener of its own,
// so that neither is ever exposed on the API port. It returns the listener
// (closing it stops the serving).
//
// The listener has no authentication, so web pages are kept out as on the
// API port of a server without a token (browserguard: no cross-site or
// same-site request, no request from another origin and, on loopback, no
// Host but a loopback name, which stops DNS rebinding from reading the
// counters and goroutine dumps or starting profiles).
//
// Both /debug/vars ("cmdline") and /debug/pprof/cmdline print os.Args,
// with no authentication, so a token given with --token is masked there
// first (the process list still shows it: prefer --token-file).
func serveDebug(addr string, srv *server.Server, token string, log *slog.Logger) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--debug-addr: %w", err)
	}
	maskArgs(os.Args, token)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	publishStats(srv)
	mux.Handle("/debug/vars", expvar.Handler())
	loopback := false
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		loopback = a.IP.IsLoopback()
	}
	hs := &http.Server{
		Handler:           browserguard.Handler(mux, false, loopback),
		ReadHeaderTimeout: 10 * time.Second,
		// A request is a GET, or a short POST to /debug/pprof/symbol.
		ReadTimeout: time.Minute,
		// No WriteTimeout: a profile or a trace takes as long as its
		// "seconds" asks, and pprof refuses one longer than a WriteTimeout.
		IdleTimeout:    time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("serving pprof", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	go func() { _ = hs.Serve(ln) }()
	return ln, nil
}

// maskArgs replaces secret in args, as a value of its own or after a
// flag's "=", with a mask.
func maskArgs(args []string, secret string) {
	if secret == "" {
		return
	}
	for i, a := range args {
		if a == secret {
			args[i] = argMask
		} else if flag, v, ok := strings.Cut(a, "="); ok && v == secret && strings.HasPrefix(flag, "-") {
			args[i] = flag + "=" + argMask
		}
	}
}

const argMask = "[masked]"

// publishOnce publishes the "conveyor" expvar: expvar names are published
// once per process, and a process serves one server.
var publishOnce sync.Once

func publishStats(srv *server.Server) {
	publishOnce.Do(func() { expvar.Publish("conveyor", expvar.Func(func() any { return srv.Stats() })) })
}
