package main

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
)

// serveDebug serves Go's pprof profiles on addr, on a listener of its own
// so that profiles are never exposed on the API port.
func serveDebug(addr string, log *slog.Logger) error {
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
	log.Info("serving pprof", "addr", "http://"+ln.Addr().String()+"/debug/pprof/")
	go func() { _ = http.Serve(ln, mux) }() //nolint:gosec // loopback debug listener chosen by the operator
	return nil
}
