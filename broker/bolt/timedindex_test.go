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
