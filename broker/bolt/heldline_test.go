package bolt_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// TestHeldLineByPriority: a key's tasks beyond its limit are admitted as
// a queue's ready line dispatches, highest priority first and FIFO within
// a priority, skipping those canceled or deleted while held; and a
// restart rebuilds the line in the same order.
func TestHeldLineByPriority(t *testing.T) {
	t.Parallel()
	for _, reopen := range []bool{false, true} {
		t.Run(fmt.Sprintf("reopen=%v", reopen), func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "conveyor.db")
			e := openEngine(t, bolt.Config{Path: path})
			keyed := func(prio int32) broker.NewTask {
				nt := bt.NewTask("q")
				nt.ConcurrencyKey = "k"
				nt.Priority = prio
				return nt
			}
			first := bt.EnqueueOne(t, e, bt.T0, keyed(4))
			running := bt.LeaseOne(t, e, "s", "q", bt.T0)
			held := map[string]*broker.Task{}
			for _, name := range []string{"b1", "c9", "d4", "g5", "e9", "h9", "f1", "i1"} {
				held[name] = bt.EnqueueOne(t, e, bt.T0, keyed(int32(name[1]-'0')))
			}
			actOne(t, e, broker.ActionCancel, held["g5"].ID)
			actOne(t, e, broker.ActionDelete, held["h9"].ID)
			actOne(t, e, broker.ActionArchive, held["i1"].ID)
			want := []string{held["c9"].ID, held["e9"].ID, held["d4"].ID, held["b1"].ID, held["f1"].ID}
			if reopen {
				if err := e.Close(); err != nil {
					t.Fatal(err)
				}
				// The task that ran is pending again, and first by id: it
				// is admitted as the file is read, the others are held.
				e = openEngine(t, bolt.Config{Path: path})
				running = bt.LeaseOne(t, e, "s", "q", bt.T0)
				if running.Task.ID != first.ID {
					t.Fatalf("after the restart, leased %s; want the task that ran, %s", running.Task.ID, first.ID)
				}
			}
			var got []string
			for range want {
				bt.Succeed(t, e, "s", running, bt.T0)
				ls := bt.Lease(t, e, "s", "q", 10, bt.T0, bt.TTL)
				if len(ls) != 1 {
					t.Fatalf("after %v, leased %d tasks; want the key's next one", got, len(ls))
				}
				running = ls[0]
				got = append(got, running.Task.ID)
			}
			bt.Succeed(t, e, "s", running, bt.T0)
			if ls := bt.Lease(t, e, "s", "q", 10, bt.T0, bt.TTL); len(ls) != 0 || !slices.Equal(got, want) {
				t.Fatalf("admitted %v then %d more; want %v only", got, len(ls), want)
			}
		})
	}
}

// actOne applies action a to the task id, which must succeed.
func actOne(t *testing.T, e *bolt.Engine, a broker.Action, id string) {
	t.Helper()
	res, err := e.Act(t.Context(), broker.ActParams{Action: a, IDs: []string{id}, Now: bt.T0})
	if err != nil || res[0].Err != nil {
		t.Fatalf("%s %s: %v %v", a, id, err, res)
	}
}
