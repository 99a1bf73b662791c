package bolt_test

import (
	"sync"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// waitTableSettled waits until the task table holds want keys with no
// growth under way, and returns its size.
func waitTableSettled(t *testing.T, e *bolt.Engine, want int) int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		slots, keys, growing := bolt.TaskTable(e)
		if !growing && keys == want {
			return slots
		}
		if time.Now().After(deadline) {
			t.Fatalf("task table: %d keys in %d slots, growing %v; want %d keys, settled", keys, slots, growing, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTaskTableGrowsOffTheLock enqueues enough tasks to pass the table's
// soft limit but not its hard one, where the table only asks to grow: the
// engine's grower grows it, and every task is still there and dispatched
// after.
func TestTaskTableGrowsOffTheLock(t *testing.T) {
	e := openEngine(t, bolt.Config{})
	before, _, _ := bolt.TaskTable(e)
	n := int(0.75 * float64(before)) // past 70%, short of 85%
	batch := make([]broker.NewTask, n)
	for i := range batch {
		batch[i] = bt.NewTask("q")
	}
	tasks := bt.Enqueue(t, e, bt.T0, batch...)
	// Short of the hard limit, only the grower grows the table.
	if after := waitTableSettled(t, e, n); after <= before {
		t.Fatalf("%d slots after the growth, from %d", after, before)
	}
	for _, task := range tasks {
		bt.RequireState(t, e, task.ID, broker.StatePending)
	}
	if got := len(bt.Lease(t, e, "s", "q", n, bt.T0, time.Minute)); got != n {
		t.Fatalf("leased %d tasks after the growth, want %d", got, n)
	}
}

// TestTaskTableGrowsUnderLoad enqueues, leases and completes from several
// goroutines while the table grows many times, in steps between their
// calls: no task is lost or duplicated.
func TestTaskTableGrowsUnderLoad(t *testing.T) {
	e := openEngine(t, bolt.Config{})
	const producers, batches, per = 4, 25, 200 // 20,000 tasks: about eight growths
	ctx := t.Context()
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for range batches {
				batch := make([]broker.NewTask, per)
				for i := range batch {
					batch[i] = bt.NewTask("q")
				}
				params := broker.EnqueueParams{Tasks: bt.WithStates(batch, bt.T0), Now: bt.T0}
				if _, err := e.Enqueue(ctx, params); err != nil {
					t.Errorf("Enqueue: %v", err)
					return
				}
			}
		})
	}
	completed := 0
	worker := make(chan struct{})
	go func() { // completes half the tasks while they are enqueued
		defer close(worker)
		pick := []broker.QueuePick{{Queue: "q", N: 50}}
		for completed < producers*batches*per/2 {
			ls, err := e.Lease(ctx, broker.LeaseParams{SessionID: "s", Picks: pick, Now: bt.T0, TTL: time.Minute})
			if err != nil {
				t.Errorf("Lease: %v", err)
				return
			}
			for _, l := range ls {
				if _, err := e.Complete(ctx, broker.Completed("s", bt.Ref(l), bt.T0, nil)); err != nil {
					t.Errorf("Complete: %v", err)
					return
				}
				completed++
			}
		}
	}()
	wg.Wait()
	<-worker
	if t.Failed() {
		return
	}
	left := producers*batches*per - completed
	waitTableSettled(t, e, left)
	bt.RequireCounts(t, e, "q", bt.Counts{broker.StatePending: int64(left), broker.StateCompleted: int64(completed)})
	seen := map[string]bool{}
	for _, l := range bt.Lease(t, e, "s", "q", left+1, bt.T0, time.Minute) {
		if seen[l.Task.ID] {
			t.Fatalf("task %s leased twice", l.Task.ID)
		}
		seen[l.Task.ID] = true
	}
	if len(seen) != left {
		t.Fatalf("leased %d tasks at the end, want %d", len(seen), left)
	}
}
