package postgres

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
)

// TestPurgeSparesATaskRunAgain: an ARCHIVED task past its retention that
// an operator runs again while a purge waits for its row is not deleted
// when the run commits: the purge checks the row it finally gets.
func TestPurgeSparesATaskRunAgain(t *testing.T) {
	t.Parallel()
	e, _ := openNode(t, pgtest.Schema(t, t.Name()))
	ctx := t.Context()
	t0 := time.Now()
	id := enqueueAt(t, e, t0, bt.NewTask("q"))[0].ID
	if ar, err := e.Act(ctx, broker.ActParams{Action: broker.ActionArchive, IDs: []string{id}, Now: t0}); err != nil || ar[0].Err != nil {
		t.Fatalf("archive: %v %v", err, ar)
	}
	run, err := e.begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lt, err := run.loadLive(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := run.run(ctx, lt, nanos(t0.Add(time.Second))); err != nil {
		t.Fatal(err)
	}
	var runPID int
	if err := run.queryRow(ctx, `SELECT pg_backend_pid()`).Scan(&runPID); err != nil {
		t.Fatal(err)
	}
	purged := make(chan error, 1)
	go func() {
		_, err := e.Purge(ctx, broker.PurgeParams{Now: t0.Add(time.Hour), CompletedBefore: t0.Add(time.Minute),
			ArchivedBefore: t0.Add(time.Minute), Limit: 100})
		purged <- err
	}()
	waitBlockedBy(t, e, runPID, "%DELETE FROM conveyor_tasks t USING gone%", "the purge to wait for the task's row")
	if err := e.commit(ctx, run); err != nil {
		t.Fatal(err)
	}
	if err := <-purged; err != nil {
		t.Fatal(err)
	}
	task, err := e.GetTask(ctx, id)
	if err != nil {
		t.Fatalf("the task run again is gone after the purge: %v", err)
	}
	if task.State != broker.StatePending {
		t.Fatalf("the task run again is %v, want pending", task.State)
	}
}
