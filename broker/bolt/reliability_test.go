package bolt_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// TestQueueLimitHoldsInEnqueueTx: the queues one EnqueueTx would create
// count against the limit together, so the 16-bit queue index never wraps.
func TestQueueLimitHoldsInEnqueueTx(t *testing.T) {
	t.Parallel()
	e := openEngine(t, bolt.Config{})
	const limit = 1<<16 - 1
	tasks := make([]broker.NewTask, limit-1)
	for i := range tasks {
		tasks[i] = bt.NewTask(fmt.Sprintf("q%d", i))
	}
	bt.Enqueue(t, e, bt.T0, tasks...)
	_, err := e.EnqueueTx(t.Context(), broker.EnqueueParams{Now: bt.T0,
		Tasks: bt.WithStates([]broker.NewTask{bt.NewTask("new-a"), bt.NewTask("new-b")}, bt.T0)})
	if err == nil {
		t.Fatal("EnqueueTx creating two queues past the limit succeeded")
	}
	tx, err := e.EnqueueTx(t.Context(), broker.EnqueueParams{Now: bt.T0, Tasks: bt.WithStates([]broker.NewTask{bt.NewTask("new-a")}, bt.T0)})
	if err != nil || len(tx) != 1 {
		t.Fatalf("EnqueueTx creating the last queue: %v", err)
	}
	// The task is leased from its own queue, not from the one its index
	// would wrap to.
	if l := bt.LeaseOne(t, e, "s1", "new-a", bt.T0); l.Task.ID != tx[0].ID || l.Task.Queue != "new-a" {
		t.Fatalf("leased %s from %q, want %s from new-a", l.Task.ID, l.Task.Queue, tx[0].ID)
	}
	if ls := bt.Lease(t, e, "s1", "q0", 2, bt.T0, bt.TTL); len(ls) != 1 {
		t.Fatalf("q0 leased %d tasks, want its own 1", len(ls))
	}
	res, err := e.Enqueue(t.Context(), broker.EnqueueParams{Now: bt.T0, Tasks: bt.WithStates([]broker.NewTask{bt.NewTask("one-too-many")}, bt.T0)})
	if err != nil || res[0].Err == nil {
		t.Fatalf("Enqueue into a queue past the limit: %v %v, want an error", res, err)
	}
}

// TestHeartbeatsDoNotGrowTheLeaseHeap: a renewal moves its lease in place,
// so a Heartbeat naming one lease a million times adds nothing, and the
// heap gives memory back once its leases end.
func TestHeartbeatsDoNotGrowTheLeaseHeap(t *testing.T) {
	t.Parallel()
	e := openEngine(t, bolt.Config{})
	bt.EnqueueOne(t, e, bt.T0, bt.NewTask("q"))
	l := bt.LeaseOne(t, e, "s1", "q", bt.T0)
	refs := make([]broker.LeaseRef, 1_000_000)
	for i := range refs {
		refs[i] = bt.Ref(l)
	}
	for i := range 5 {
		n, err := e.Extend(t.Context(), broker.ExtendParams{SessionID: "s1", Leases: refs, Now: bt.T0.Add(time.Duration(i+1) * time.Second), TTL: bt.TTL})
		if err != nil || n != len(refs) {
			t.Fatalf("Extend = %d, %v", n, err)
		}
	}
	if n, _ := bolt.LeaseHeapSize(e); n != 1 {
		t.Fatalf("lease heap holds %d entries for 1 lease", n)
	}

	tasks := make([]broker.NewTask, 100_000)
	for i := range tasks {
		tasks[i] = bt.NewTask("many")
	}
	bt.Enqueue(t, e, bt.T0, tasks...)
	ls := bt.Lease(t, e, "s2", "many", len(tasks), bt.T0, bt.TTL)
	for _, l := range ls {
		bt.Succeed(t, e, "s2", l, bt.T0)
	}
	if n, c := bolt.LeaseHeapSize(e); n != 1 || c > 4096 {
		t.Fatalf("after 100,000 leases ended the heap holds %d entries in an array of %d", n, c)
	}
}

// TestEnqueueTxExistingGoneMeanwhile: an EnqueueTx whose items name
// existing tasks (stored before, or an earlier item of the call) answers
// for them once its commit is durable; a task deleted in between does not
// turn the committed call into a failure: the item is answered with the
// task as the call found it.
func TestEnqueueTxExistingGoneMeanwhile(t *testing.T) {
	t.Parallel()
	var e *bolt.Engine
	var gone []string // deleted once the commit is durable
	cfg := bolt.Config{}
	bolt.SetAfterTxCommit(&cfg, func() {
		if len(gone) == 0 {
			return
		}
		res, err := e.Act(t.Context(), broker.ActParams{Action: broker.ActionDelete, IDs: gone, Now: bt.T0})
		if err != nil {
			t.Errorf("delete: %v", err)
			return
		}
		for i, r := range res {
			if r.Err != nil {
				t.Errorf("delete %s: %v", gone[i], r.Err)
			}
		}
	})
	e = openEngine(t, cfg)
	live, done, n1 := bt.NewTask("q"), bt.NewTask("q"), bt.NewTask("q")
	live.ID, done.ID, n1.ID = bt.NewID(), bt.NewID(), bt.NewID()
	live.Type, done.Type = "orig-live", "orig-done"
	bt.Enqueue(t, e, bt.T0, done)
	bt.Succeed(t, e, "s1", bt.LeaseOne(t, e, "s1", "q", bt.T0), bt.T0)
	bt.Enqueue(t, e, bt.T0, live)

	again, againDone := live, done
	again.Type, againDone.Type = "changed", "changed"
	gone = []string{live.ID, done.ID, n1.ID}
	out, err := e.EnqueueTx(t.Context(), broker.EnqueueParams{Now: bt.T0,
		Tasks: bt.WithStates([]broker.NewTask{n1, again, againDone, n1}, bt.T0)})
	if err != nil {
		t.Fatalf("EnqueueTx whose existing tasks were deleted after it committed: %v", err)
	}
	if got := out[1]; got.ID != live.ID || got.Queue != "q" || got.State != broker.StatePending {
		t.Fatalf("tasks[1] = %+v, want the pending task as found", got)
	}
	if got := out[2]; got.ID != done.ID || got.Type != "orig-done" || got.State != broker.StateCompleted {
		t.Fatalf("tasks[2] = %+v, want the completed task as found", got)
	}
	if out[0].Existed || !out[1].Existed || !out[2].Existed || !out[3].Existed {
		t.Fatalf("Existed = %v, %v, %v, %v; want it set on the existing tasks only",
			out[0].Existed, out[1].Existed, out[2].Existed, out[3].Existed)
	}
	if out[0].ID != n1.ID || out[3].ID != n1.ID || out[3].State != broker.StatePending {
		t.Fatalf("tasks[0] = %+v, tasks[3] = %+v, want both the new task", out[0], out[3])
	}
	bt.RequireCounts(t, e, "q", bt.Counts{})
}
