package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/internal/testwait"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestWaitSessionIsTheRunsOwn connects another application's worker to
// the server first, as a running server (--addr) has: W4's load must wait
// for the run's own session, not start on seeing any.
func TestWaitSessionIsTheRunsOwn(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	r := &runner{cfg: Config{Concurrency: 4}, addr: srv.URL(), label: "this-run"}
	stopOther := runOtherWorker(t, r.addr)
	defer stopOther()
	testwait.Until(t, 30*time.Second, "the other worker's session", func() bool {
		res, err := r.admin().ListWorkers(context.Background(), connect.NewRequest(&conveyorv1.ListWorkersRequest{}))
		return err == nil && len(res.Msg.GetWorkers()) == 1
	})

	// A bound on a wait that must not end by itself, not a timing claim.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if err := r.waitSession(ctx); err == nil {
		t.Fatal("waitSession returned with only another application's worker connected")
	}
	stop, err := r.startWorker(context.Background(), func(int) {})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stop() }()
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.waitSession(ctx); err != nil {
		t.Fatalf("the run's own worker is connected: %v", err)
	}
}

// runOtherWorker runs a worker of another queue against addr until stop.
func runOtherWorker(t *testing.T, addr string) (stop func()) {
	t.Helper()
	w, err := conveyor.NewWorker(addr, conveyor.WithQueue("elsewhere", 1))
	if err != nil {
		t.Fatal(err)
	}
	w.HandleFunc("other", func(context.Context, *conveyor.Delivery) error { return nil })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the other worker: %v", err)
		}
	}
}
