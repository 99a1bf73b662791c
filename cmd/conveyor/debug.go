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

	"github.com/conveyor-dev/conveyor/server"
)

// serveDebug serves Go's pprof profiles, and the server's counters as
// expvar JSON (/debug/vars, key "conveyor"), on addr: a listener of its own,
// so that neither is ever exposed on the API port. It returns the listener
// (closing it stops the serving).
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
	log.Info("serving pprof", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	go func() { _ = http.Serve(ln, mux) }() //nolint:gosec // loopback debug listener chosen by the operator
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
