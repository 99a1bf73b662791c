package bolt

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

func TestSmoke(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "c.db")
	e, err := Open(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	res, err := e.Enqueue(ctx, broker.EnqueueParams{Now: now, Tasks: []broker.NewTask{
		{Queue: "default", Type: "a", Payload: []byte("x"), Priority: 4, MaxRetry: 25},
		{Queue: "default", Type: "b", Priority: 9, MaxRetry: 25},
	}})
	if err != nil || res[0].Err != nil || res[1].Err != nil {
		t.Fatal(err, res)
	}
	counts := make([]int, 1)
	e.Ready([]string{"default"}, counts)
	if counts[0] != 2 {
		t.Fatalf("ready %d", counts[0])
	}
	ls, err := e.Lease(ctx, broker.LeaseParams{SessionID: "s", Picks: []broker.QueuePick{{Queue: "default", N: 5}}, Now: now, TTL: time.Minute})
	if err != nil || len(ls) != 2 || ls[0].Task.Type != "b" {
		t.Fatalf("lease %v %+v", err, ls)
	}
	st, err := e.Complete(ctx, broker.CompleteParams{SessionID: "s", Lease: broker.LeaseRef{TaskID: ls[0].Task.ID, Token: ls[0].Token}, Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS, Now: now})
	if err != nil || st != stateCompleted {
		t.Fatal(st, err)
	}
	got, err := e.GetTask(ctx, ls[0].Task.ID)
	if err != nil || got.State != stateCompleted {
		t.Fatal(got, err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	e, err = Open(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got, err = e.GetTask(ctx, ls[1].Task.ID)
	if err != nil || got.State != statePending {
		t.Fatal(got, err)
	}
	e.Ready([]string{"default"}, counts)
	if counts[0] != 1 {
		t.Fatalf("ready after restart %d", counts[0])
	}
	if err := e.Check(); err != nil {
		t.Fatal(err)
	}
}
