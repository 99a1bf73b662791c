package bolt

import (
	"slices"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

func keyedTask(queue, ck, id string) broker.NewTask {
	nt := bt.NewTask(queue)
	nt.ConcurrencyKey = ck
	nt.ID = id
	return nt
}

// TestHeldEntryOfReusedIDStaysWithItsOldKey: a task held back by key a is
// deleted, and its id is used again by a producer for a task of key b,
// held back behind b's running task. The stale entry the first task left
// in a's held FIFO must not count as a held task of a: when a's running
// task ends, a admits its own next held task, and the task of b stays
// held until b's running task ends.
func TestHeldEntryOfReusedIDStaysWithItsOldKey(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, Config{})
	bt.EnqueueOne(t, e, bt.T0, keyedTask("q", "a", ""))
	runA := bt.LeaseOne(t, e, "s", "q", bt.T0)
	id := ulid.Make().String()
	bt.EnqueueOne(t, e, bt.T0, keyedTask("q", "a", id)) // held by a
	w := bt.EnqueueOne(t, e, bt.T0, keyedTask("q", "a", ""))
	bt.EnqueueOne(t, e, bt.T0, keyedTask("q", "b", ""))
	runB := bt.LeaseOne(t, e, "s", "q", bt.T0)

	act(t, e, broker.ActionDelete, []string{id}, bt.T0)
	bt.EnqueueOne(t, e, bt.T0, keyedTask("q", "b", id)) // same id, now held by b

	bt.Succeed(t, e, "s", runA, bt.T0)
	got := leasedIDs(bt.Lease(t, e, "s", "q", 10, bt.T0, time.Hour))
	if !slices.Equal(got, []string{w.ID}) {
		t.Fatalf("after a's running task ended, leased %v; want only a's next held task %s "+
			"(%s is b's, and b's task still runs)", got, w.ID, id)
	}
	bt.Succeed(t, e, "s", runB, bt.T0)
	if got := leasedIDs(bt.Lease(t, e, "s", "q", 10, bt.T0, time.Hour)); !slices.Equal(got, []string{id}) {
		t.Fatalf("after b's running task ended, leased %v; want b's held task %s", got, id)
	}
}

// TestHeldPassOfOtherKeyKeepsValidEntry: as above, but a compaction pass
// over a's held FIFO meets the stale entry of the reused id first, and
// then one over b's: b's pass must not drop the task's only valid entry
// as a duplicate because a's pass marked the task.
func TestHeldPassOfOtherKeyKeepsValidEntry(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, Config{compactSlack: 1})
	bt.EnqueueOne(t, e, bt.T0, keyedTask("q", "a", ""))
	bt.LeaseOne(t, e, "s", "q", bt.T0) // a's, runs throughout
	id := ulid.Make().String()
	bt.EnqueueOne(t, e, bt.T0, keyedTask("q", "a", id))
	bt.EnqueueOne(t, e, bt.T0, keyedTask("q", "a", "")) // keeps a's FIFO alive
	bt.EnqueueOne(t, e, bt.T0, keyedTask("q", "b", ""))
	runB := bt.LeaseOne(t, e, "s", "q", bt.T0)

	act(t, e, broker.ActionDelete, []string{id}, bt.T0)
	bt.EnqueueOne(t, e, bt.T0, keyedTask("q", "b", id)) // held by b
	bt.EnqueueOne(t, e, bt.T0, keyedTask("q", "b", "")) // keeps b's FIFO alive

	leave := func(ck string, n int) {
		var ids []string
		for range n {
			ids = append(ids, bt.EnqueueOne(t, e, bt.T0, keyedTask("q", ck, "")).ID)
		}
		act(t, e, broker.ActionDelete, ids, bt.T0)
	}
	// One pass over a's FIFO: it meets the reused id's stale entry first,
	// takes it for a held task of a and marks the task with a's mark.
	leave("a", 3)
	// b's first pass gives the same mark: it takes the task's only valid
	// entry for a duplicate.
	leave("b", 6)

	bt.Succeed(t, e, "s", runB, bt.T0)
	if got := leasedIDs(bt.Lease(t, e, "s", "q", 10, bt.T0, time.Hour)); !slices.Equal(got, []string{id}) {
		t.Fatalf("after b's running task ended, leased %v; want b's oldest held task %s", got, id)
	}
	if s := heldStats(e, "q", "b"); s.valid != 1 {
		t.Fatalf("b holds %d tasks back, want 1", s.valid)
	}
}

// TestHeldEntryOfReusedIDAtOtherPriority: a task held by key a at
// priority 9 is deleted, and its id used again for a task of a at
// priority 1. The stale entry in a's FIFO of priority 9 must not stand
// for the new task: a's held task of priority 5 goes first.
func TestHeldEntryOfReusedIDAtOtherPriority(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, Config{})
	withPrio := func(nt broker.NewTask, prio int32) broker.NewTask { nt.Priority = prio; return nt }
	bt.EnqueueOne(t, e, bt.T0, keyedTask("q", "a", ""))
	run := bt.LeaseOne(t, e, "s", "q", bt.T0)
	id := ulid.Make().String()
	bt.EnqueueOne(t, e, bt.T0, withPrio(keyedTask("q", "a", id), 9))
	w := bt.EnqueueOne(t, e, bt.T0, withPrio(keyedTask("q", "a", ""), 5))
	act(t, e, broker.ActionDelete, []string{id}, bt.T0)
	bt.EnqueueOne(t, e, bt.T0, withPrio(keyedTask("q", "a", id), 1))

	var got []string
	for range 2 {
		bt.Succeed(t, e, "s", run, bt.T0)
		run = bt.LeaseOne(t, e, "s", "q", bt.T0)
		got = append(got, run.Task.ID)
	}
	if want := []string{w.ID, id}; !slices.Equal(got, want) {
		t.Fatalf("admitted %v; want %v (priority 5, then the reused id's task of priority 1)", got, want)
	}
}
