package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestTimedOutRunSaysHowFarItGot: a W3 run that gives up waiting for its
// tasks to complete (the bench queue is paused, so none is dispatched)
// reports how many were acknowledged, handled and completed, in its error
// and its JSON.
func TestTimedOutRunSaysHowFarItGot(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	admin := (&runner{addr: srv.URL()}).admin()
	if _, err := admin.PauseQueue(context.Background(), connect.NewRequest(&conveyorv1.PauseQueueRequest{Queue: benchQueue})); err != nil {
		t.Fatal(err)
	}
	// A bound on a wait that cannot end by itself, not a timing claim.
	res := Run(context.Background(), Config{Workload: "W3", N: 10, Addr: srv.URL(), Concurrency: 2, waitTimeout: 100 * time.Millisecond})
	if res.OK {
		t.Fatal("W3 on a paused queue succeeded")
	}
	p := res.Progress
	if p == nil || p.Acked != 10 || p.Handled != 0 || p.Completed == nil || *p.Completed != 0 {
		t.Errorf("progress %+v; want 10 acknowledged, 0 handled, 0 completed", p)
	}
	for _, want := range []string{"10 of 10 tasks acknowledged, 0 handled", "the server reports 0 completed, 10 pending", "deadline exceeded"} {
		if !strings.Contains(res.Err, want) {
			t.Errorf("err %q; want it to say %q", res.Err, want)
		}
	}
}
