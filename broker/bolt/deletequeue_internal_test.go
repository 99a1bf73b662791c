package bolt

import (
	"errors"
	"fmt"
	"testing"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// TestDeleteQueueMakesRoom: at the limit of queues, a delete frees a
// slot, which the next new queue takes without renumbering the others;
// a batch that creates queues counts the free slot too.
func TestDeleteQueueMakesRoom(t *testing.T) {
	e := openTestEngine(t, Config{})
	e.mu.Lock()
	for i := e.liveQueuesLocked(); i < maxQueues; i++ {
		e.queueLocked(fmt.Sprintf("q%d", i)) // in memory only: the limit is the engine's
	}
	full := e.checkQueueLocked("new")
	e.mu.Unlock()
	if !errors.Is(full, broker.ErrResourceExhausted) {
		t.Fatalf("a new queue at the limit: %v", full)
	}
	bt.EnqueueOne(t, e, bt.T0, bt.NewTask("q7"))
	if err := e.DeleteQueue(t.Context(), "q5"); err != nil {
		t.Fatal(err)
	}
	_, err := e.EnqueueTx(t.Context(), broker.EnqueueParams{Now: bt.T0,
		Tasks: bt.WithStates([]broker.NewTask{bt.NewTask("new"), bt.NewTask("newer")}, bt.T0)})
	if !errors.Is(err, broker.ErrResourceExhausted) {
		t.Fatalf("EnqueueTx creating two queues in one free slot: %v", err)
	}
	task := bt.EnqueueOne(t, e, bt.T0, bt.NewTask("new"))
	e.mu.Lock()
	idx, q7 := e.byName["new"].index, e.byName["q7"].index
	e.mu.Unlock()
	if idx != 5 || q7 != 7 {
		t.Fatalf("the new queue took slot %d (want 5, the deleted one's), q7 is at %d (want 7)", idx, q7)
	}
	if l := bt.LeaseOne(t, e, "s1", "new", bt.T0); l.Task.ID != task.ID {
		t.Fatalf("leased %s from the new queue, want %s", l.Task.ID, task.ID)
	}
	bt.RequireCounts(t, e, "q7", bt.Counts{broker.StatePending: 1})
}
