package main

import (
	"expvar"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"

	"github.com/conveyor-dev/conveyor/server"
)

// serveDebug serves Go's pprof profiles, and the server's counters as
// expvar JSON (/debug/vars, key "conveyor"), on addr: a listener of its own,
// so that neither is ever exposed on the API port.
func serveDebug(addr string, srv *server.Server, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--debug-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	expvar.Publish("conveyor", expvar.Func(func() any { return srv.Stats() }))
	mux.Handle("/debug/vars", expvar.Handler())
	log.Info("serving pprof", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	go func() { _ = http.Serve(ln, mux) }() //nolint:gosec // loopback debug listener chosen by the operator
	return nil
}
