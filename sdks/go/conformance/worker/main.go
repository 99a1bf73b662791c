// Command worker is the Go SDK's conformance worker: the executable form
// of the protocol's §9 that the cross-SDK suite (conformance/) runs as a
// child process. CONTRACT.md ("SDK conformance worker") pins it.
//
// Configuration comes from the environment only: CONVEYOR_URL,
// CONVEYOR_TOKEN, CONVEYOR_QUEUES (name=weight,...; default default=1),
// CONVEYOR_CONCURRENCY (default 4), CONVEYOR_PROTOCOL (grpc or connect;
// default grpc), CONVEYOR_BATCH_TYPES, CONVEYOR_DRAIN_MS (default 5000),
// CONVEYOR_TLS_CA, CONVEYOR_RELEASE_ID (the worker's release; default
// unversioned) and CONVEYOR_ONCE_LOG (the file conformance.once appends
// to).
//
// It handles the conformance task types (package handlers), and declares
// them in its Hello: conformance.echo, .fail, .skip, .panic, .sleep,
// .progress, .batch (a batch type when CONVEYOR_BATCH_TYPES names it), and
// conformance.once, which appends one line, the task's id, to the file
// CONVEYOR_ONCE_LOG names (opened O_APPEND, synced and closed before the
// handler returns), then succeeds: enqueued with at_most_once, it shows
// how many times each task ran.
//
// It prints "ready <session_id>" on stdout on each Welcome and nothing else
// there; logs go to stderr. On SIGTERM (or SIGINT) it drains and exits 0. A
// fatal session error exits 3, bad configuration 2.
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/sdks/go/conformance/handlers"
)

// Exit statuses the contract pins.
const (
	exitBadConfig = 2
	exitFatal     = 3
)

func main() {
	os.Exit(run(os.Getenv, os.Stdout, os.Stderr))
}

// run is main with its environment and streams passed in; it returns the
// exit status.
func run(getenv func(string) string, stdout, stderr io.Writer) int {
	cfg, err := loadConfig(getenv)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "conformance worker: bad configuration: %v\n", err)
		return exitBadConfig
	}
	opts, err := cfg.options()
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "conformance worker: bad configuration: %v\n", err)
		return exitBadConfig
	}
	opts = append(opts,
		conveyor.WithLogger(slog.New(slog.NewTextHandler(stderr, nil))),
		conveyor.WithSessionHook(func(id string) { _, _ = fmt.Fprintf(stdout, "ready %s\n", id) }),
	)
	w, err := conveyor.NewWorker(cfg.url, opts...)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "conformance worker: bad configuration: %v\n", err)
		return exitBadConfig
	}
	handlers.Register(w, handlers.Config{BatchTypes: cfg.batchTypes, OnceLog: cfg.onceLog})

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := w.Run(ctx); err != nil {
		_, _ = fmt.Fprintf(stderr, "conformance worker: %v\n", err)
		return exitFatal
	}
	return 0
}
