package bolt

import (
	"errors"
	"fmt"
	"testing"

	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
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

// TestDeleteQueueOpDropsEarlierDeltas: a commit that carries the delete
// of a queue's last task (an operator's delete of a finished task: a
// count delta, written at the commit's end) and then the queue's delete
// must not bring the record back holding that delta; a delta of a later
// op (an enqueue into the name again) is the fresh queue's.
func TestDeleteQueueOpDropsEarlierDeltas(t *testing.T) {
	e := openTestEngine(t, Config{})
	err := e.db.Update(func(tx *bbolt.Tx) error {
		return runOps(tx, []op{
			func(w *txw) error {
				return w.qrecs.Put([]byte("q"), marshal(&storagev1.QueueRecord{Completed: 1, Processed: 1, Enqueued: 1, Paused: true}))
			},
			func(w *txw) error { w.termDelta("q", stateCompleted, -1); return nil },
			deleteQueueOp("q"),
			func(w *txw) error { w.delta("q").enqueued++; return nil },
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := &storagev1.QueueRecord{}
	err = e.db.View(func(tx *bbolt.Tx) error { return proto.Unmarshal(tx.Bucket(bucketQueues).Get([]byte("q")), rec) })
	if err != nil {
		t.Fatal(err)
	}
	if want := (&storagev1.QueueRecord{Enqueued: 1}); !proto.Equal(rec, want) {
		t.Fatalf("the record after the commit = %v, want %v", rec, want)
	}
}
