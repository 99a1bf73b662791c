package bolt_test

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// TestExpiryIndexStaysBounded: tasks with an expiry or a deadline far off
// that finish long before it leave their index entries stale. Behind a
// task that still waits with the earliest time (here on a queue nobody
// serves), lazy deletion alone kept every one of them; the index now
// stays within a bound of the tasks that can still expire, and those
// still expire, on time, through any compaction.
func TestExpiryIndexStaysBounded(t *testing.T) {
	e := openEngine(t, bolt.Config{})
	waiting := func(queue string, expiresIn time.Duration) broker.NewTask {
		nt := bt.NewTask(queue)
		nt.ExpiresAt = bt.T0.Add(expiresIn)
		return nt
	}
	first := bt.EnqueueOne(t, e, bt.T0, waiting("unserved", time.Hour))
	var kept []string
	const rounds, perRound = 50, 1000
	for round := range rounds {
		batch := make([]broker.NewTask, perRound)
		for i := range batch {
			batch[i] = waiting("busy", 24*time.Hour)
			if i%2 == 0 {
				batch[i].ExpiresAt, batch[i].Deadline = time.Time{}, bt.T0.Add(48*time.Hour)
			}
		}
		bt.Enqueue(t, e, bt.T0, batch...)
		for _, l := range bt.Lease(t, e, "s", "busy", perRound, bt.T0, bt.TTL) {
			bt.Succeed(t, e, "s", l, bt.T0)
		}
		if round%10 == 0 { // some that will still expire, through the compactions
			kept = append(kept, bt.EnqueueOne(t, e, bt.T0, waiting("unserved", 2*time.Hour)).ID)
		}
		// The bound: twice the entries that can be current, plus slack,
		// plus one step's worth of entries not looked at yet.
		if n, bound := bolt.ExpiryIndexSize(e), 2*(len(kept)+1)+4096+perRound; n > bound {
			t.Fatalf("after %d tasks finished, the expiry index holds %d entries, want at most %d", (round+1)*perRound, n, bound)
		}
	}
	if _, err := e.PromoteDue(t.Context(), bt.T0.Add(90*time.Minute)); err != nil {
		t.Fatal(err)
	}
	bt.RequireState(t, e, first.ID, broker.StateArchived)
	for _, id := range kept {
		bt.RequireState(t, e, id, broker.StatePending)
	}
	if _, err := e.PromoteDue(t.Context(), bt.T0.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, id := range kept {
		bt.RequireState(t, e, id, broker.StateArchived)
	}
}

// TestDueIndexStaysBounded: scheduled tasks canceled long before their
// time leave their due-time entries stale; behind a task still scheduled
// earlier, lazy deletion alone kept every one. The index stays bounded,
// and the tasks still scheduled still come due, on time.
func TestDueIndexStaysBounded(t *testing.T) {
	e := openEngine(t, bolt.Config{})
	scheduled := func(in time.Duration) broker.NewTask {
		nt := bt.NewTask("later")
		nt.ProcessAt = bt.T0.Add(in)
		return nt
	}
	first := bt.EnqueueOne(t, e, bt.T0, scheduled(time.Hour))
	var kept []string
	const rounds, perRound = 50, 1000
	for round := range rounds {
		batch := make([]broker.NewTask, perRound)
		for i := range batch {
			batch[i] = scheduled(24 * time.Hour)
		}
		ids := make([]string, perRound)
		for i, task := range bt.Enqueue(t, e, bt.T0, batch...) {
			ids[i] = task.ID
		}
		res, err := e.Act(t.Context(), broker.ActParams{Action: broker.ActionCancel, IDs: ids, Now: bt.T0})
		if err != nil || len(res) != perRound {
			t.Fatalf("cancel: %v", err)
		}
		if round%10 == 0 {
			kept = append(kept, bt.EnqueueOne(t, e, bt.T0, scheduled(2*time.Hour)).ID)
		}
		if n, bound := bolt.DueIndexSize(e), 4*4096+2*perRound; n > bound {
			t.Fatalf("after %d scheduled tasks were canceled, the due index holds %d entries, want at most %d", (round+1)*perRound, n, bound)
		}
	}
	if _, err := e.PromoteDue(t.Context(), bt.T0.Add(90*time.Minute)); err != nil {
		t.Fatal(err)
	}
	bt.RequireState(t, e, first.ID, broker.StatePending)
	for _, id := range kept {
		bt.RequireState(t, e, id, broker.StateScheduled)
	}
	if _, err := e.PromoteDue(t.Context(), bt.T0.Add(3*time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, id := range kept {
		bt.RequireState(t, e, id, broker.StatePending)
	}
}
