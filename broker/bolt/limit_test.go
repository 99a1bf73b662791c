package bolt_test

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// TestLeaseLimitedByTimeout checks that heartbeats cannot keep an attempt
// alive past its timeout plus the grace: the reaper takes it back as a
// failed attempt.
func TestLeaseLimitedByTimeout(t *testing.T) {
	t.Parallel()
	e := openEngine(t, bolt.Config{LimitGrace: time.Second})
	nt := bt.NewTask("q")
	nt.Options = &conveyorv1.TaskOptions{Timeout: durationpb.New(2 * time.Second)}
	bt.Enqueue(t, e, bt.T0, nt)
	ls, err := e.Lease(t.Context(), broker.LeaseParams{SessionID: "s1", Picks: []broker.QueuePick{{Queue: "q", N: 1}}, Now: bt.T0, TTL: time.Minute})
	if err != nil || len(ls) != 1 {
		t.Fatalf("Lease = %v, %v", ls, err)
	}
	if want := bt.T0.Add(3 * time.Second); !ls[0].Expiry.Equal(want) {
		t.Fatalf("lease expiry %v, want the timeout plus the grace, %v", ls[0].Expiry, want)
	}
	ref := bt.Ref(ls[0])
	if n, err := e.Extend(t.Context(), broker.ExtendParams{SessionID: "s1", Leases: []broker.LeaseRef{ref}, Now: bt.T0.Add(time.Second), TTL: time.Minute}); err != nil || n != 1 {
		t.Fatalf("Extend = %d, %v", n, err)
	}
	lapsed, _, err := e.ReapLeases(t.Context(), bt.T0.Add(3*time.Second))
	if err != nil || len(lapsed) != 1 {
		t.Fatalf("ReapLeases past the limit = %v, %v; want the lease back despite the heartbeat", lapsed, err)
	}
	got := bt.GetTask(t, e, ref.TaskID)
	if got.State != conveyorv1.TaskState_TASK_STATE_PENDING || got.Retried != 1 || got.LastError != "the attempt ran past its timeout or deadline" {
		t.Fatalf("after the limit: state %v retried %d last_error %q", got.State, got.Retried, got.LastError)
	}
}
