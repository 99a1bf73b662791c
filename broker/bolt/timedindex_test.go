package bolt_test

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// timedChurn drives one of the engine's timed indexes through 50 rounds:
// 1000 tasks made by churn are enqueued and leave at once (leave), their
// entries going stale behind first, which keeps the earliest time, and
// every tenth round one task made by keep stays. After each round the
// index (size) must hold at most bound entries.
type timedChurn struct {
	first, keep broker.NewTask
	churn       func(i int) broker.NewTask
	leave       func(t *testing.T, e *bolt.Engine, tasks []*broker.Task)
	size        func(*bolt.Engine) int
	bound       int
}

// run returns the ids of first and of the kept tasks.
func (c timedChurn) run(t *testing.T, e *bolt.Engine) (first string, kept []string) {
	t.Helper()
	first = bt.EnqueueOne(t, e, bt.T0, c.first).ID
	const rounds, perRound = 50, 1000
	for round := range rounds {
		batch := make([]broker.NewTask, perRound)
		for i := range batch {
			batch[i] = c.churn(i)
		}
		c.leave(t, e, bt.Enqueue(t, e, bt.T0, batch...))
		if round%10 == 0 {
			kept = append(kept, bt.EnqueueOne(t, e, bt.T0, c.keep).ID)
		}
		if n := c.size(e); n > c.bound {
			t.Fatalf("after %d tasks left, the index holds %d entries, want at most %d", (round+1)*perRound, n, c.bound)
		}
	}
	return first, kept
}

// promoteAt runs PromoteDue at T0+d and requires each of ids in want.
func promoteAt(t *testing.T, e *bolt.Engine, d time.Duration, want broker.State, ids ...string) {
	t.Helper()
	if _, err := e.PromoteDue(t.Context(), bt.T0.Add(d)); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		bt.RequireState(t, e, id, want)
	}
}

// TestExpiryIndexStaysBounded: tasks with an expiry or a deadline far off
// that finish long before it leave their index entries stale. Behind a
// task that still waits with the earliest time (here on a queue nobody
// serves), lazy deletion alone kept every one of them; the index now
// stays within a bound of the tasks that can still expire, and those
// still expire, on time, through any compaction.
func TestExpiryIndexStaysBounded(t *testing.T) {
	e := openEngine(t, bolt.Config{})
	expiring := func(queue string, in time.Duration) broker.NewTask {
		nt := bt.NewTask(queue)
		nt.ExpiresAt = bt.T0.Add(in)
		return nt
	}
	first, kept := timedChurn{
		first: expiring("unserved", time.Hour),
		keep:  expiring("unserved", 2*time.Hour),
		churn: func(i int) broker.NewTask {
			nt := expiring("busy", 24*time.Hour)
			if i%2 == 0 {
				nt.ExpiresAt, nt.Deadline = time.Time{}, bt.T0.Add(48*time.Hour)
			}
			return nt
		},
		leave: func(t *testing.T, e *bolt.Engine, tasks []*broker.Task) {
			for _, l := range bt.Lease(t, e, "s", "busy", len(tasks), bt.T0, bt.TTL) {
				bt.Succeed(t, e, "s", l, bt.T0)
			}
		},
		size: bolt.ExpiryIndexSize,
		// Twice the entries that can be current (6 at most), plus the
		// slack, plus a round's entries not looked at yet.
		bound: 2*6 + 4096 + 1000,
	}.run(t, e)
	promoteAt(t, e, 90*time.Minute, broker.StateArchived, first)
	promoteAt(t, e, 90*time.Minute, broker.StatePending, kept...)
	promoteAt(t, e, 3*time.Hour, broker.StateArchived, kept...)
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
	first, kept := timedChurn{
		first: scheduled(time.Hour),
		keep:  scheduled(2 * time.Hour),
		churn: func(int) broker.NewTask { return scheduled(24 * time.Hour) },
		leave: func(t *testing.T, e *bolt.Engine, tasks []*broker.Task) {
			ids := make([]string, len(tasks))
			for i, task := range tasks {
				ids[i] = task.ID
			}
			if res, err := e.Act(t.Context(), broker.ActParams{Action: broker.ActionCancel, IDs: ids, Now: bt.T0}); err != nil || len(res) != len(ids) {
				t.Fatalf("cancel: %v", err)
			}
		},
		size: bolt.DueIndexSize,
		// The index is counted when it has doubled since it last was, so
		// it reaches twice the slack before a compaction, plus a round.
		bound: 2*4096 + 2*1000,
	}.run(t, e)
	promoteAt(t, e, 90*time.Minute, broker.StatePending, first)
	promoteAt(t, e, 90*time.Minute, broker.StateScheduled, kept...)
	promoteAt(t, e, 3*time.Hour, broker.StatePending, kept...)
}
