// Command pushworker is the Go SDK's conformance push worker: an HTTP push
// endpoint (Worker.PushHandler) serving the conformance task types, the
// same handlers as the conformance worker (package handlers), for a test
// to run as a child process and name in a queue's push.url.
//
// Configuration comes from the environment only:
//
//   - CONVEYOR_PUSH_LISTEN: the address to listen on (default
//     127.0.0.1:0, a free loopback port).
//   - CONVEYOR_PUSH_SECRET: the push secrets, whsec_..., comma-separated,
//     as the server's.
//   - CONVEYOR_PUSH_DEV: "1" accepts unsigned requests when there is no
//     secret (development mode, loopback only); ignored with a secret.
//   - CONVEYOR_BATCH_TYPES: task types served by a batch handler, each
//     delivery a batch of one, as the conformance worker's.
//   - CONVEYOR_ONCE_LOG: the file conformance.once appends each task's id
//     to, as the conformance worker's. (The server pushes no at-most-once
//     task; the endpoint would give one back unrun.)
//
// Once bound it prints exactly one line on stdout, "listening
// http://<addr>", and nothing else there; logs go to stderr. On SIGTERM
// (or SIGINT) it stops with http.Server.Shutdown, letting running handlers
// finish for up to 10 seconds, and exits 0. Bad configuration (no secret
// without CONVEYOR_PUSH_DEV=1, a bad secret, an address it cannot bind)
// exits 2 with the error on stderr; a failure while serving exits 1.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/sdks/go/conformance/handlers"
)

// Exit statuses.
const (
	exitServe     = 1
	exitBadConfig = 2
)

// Defaults.
const (
	defaultListen = "127.0.0.1:0"
	// shutdownGrace bounds the wait for running handlers on SIGTERM, as a
	// platform's own grace (Cloud Run's is 10 seconds) would.
	shutdownGrace = 10 * time.Second
	// readHeaderTimeout bounds a client's headers, so that a slow one
	// cannot hold a connection open.
	readHeaderTimeout = 10 * time.Second
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Getenv, os.Stdout, os.Stderr))
}

// run is main with its stop signal, environment and streams passed in; it
// returns the exit status.
func run(ctx context.Context, getenv func(string) string, stdout, stderr io.Writer) int {
	log := slog.New(slog.NewTextHandler(stderr, nil))
	h, err := handler(getenv, log)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "conformance push worker: bad configuration: %v\n", err)
		return exitBadConfig
	}
	addr := getenv("CONVEYOR_PUSH_LISTEN")
	if addr == "" {
		addr = defaultListen
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "conformance push worker: bad configuration: CONVEYOR_PUSH_LISTEN: %v\n", err)
		return exitBadConfig
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	_, _ = fmt.Fprintf(stdout, "listening http://%s\n", ln.Addr())

	select {
	case err := <-served:
		_, _ = fmt.Fprintf(stderr, "conformance push worker: %v\n", err)
		return exitServe
	case <-ctx.Done():
	}
	stopCtx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(stopCtx); err != nil {
		log.Warn("handlers still running at the end of the shutdown grace; closing their connections", "err", err)
		_ = srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		_, _ = fmt.Fprintf(stderr, "conformance push worker: %v\n", err)
		return exitServe
	}
	return 0
}

// handler is the push handler the environment configures.
func handler(getenv func(string) string, log *slog.Logger) (http.Handler, error) {
	w, err := conveyor.NewPushWorker(conveyor.WithLogger(log))
	if err != nil {
		return nil, err
	}
	var batchTypes []string
	for t := range strings.SplitSeq(getenv("CONVEYOR_BATCH_TYPES"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			batchTypes = append(batchTypes, t)
		}
	}
	handlers.Register(w, handlers.Config{BatchTypes: batchTypes, OnceLog: getenv(handlers.EnvOnceLog)})
	var opts []conveyor.PushOption
	secrets := getenv("CONVEYOR_PUSH_SECRET")
	switch dev := getenv("CONVEYOR_PUSH_DEV"); {
	case dev != "" && dev != "0" && dev != "1":
		return nil, fmt.Errorf("CONVEYOR_PUSH_DEV must be 1 or 0, got %q", dev)
	case strings.TrimSpace(strings.ReplaceAll(secrets, ",", "")) != "":
		opts = append(opts, conveyor.WithPushSecrets(strings.Split(secrets, ",")...))
	case dev == "1":
		opts = append(opts, conveyor.WithPushDevelopmentMode())
	default:
		return nil, errors.New("no push secret: set CONVEYOR_PUSH_SECRET (whsec_..., comma-separated), " +
			"or CONVEYOR_PUSH_DEV=1 to accept unsigned requests (loopback development only)")
	}
	return w.PushHandler(opts...)
}
