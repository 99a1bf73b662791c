package bolt_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// TestCronFireWaitsForANotDurableUniqueHolder: a cron fire whose task's
// unique key is held by a task whose enqueue is not durable yet waits for
// that commit, as Enqueue does, instead of reporting (and recording on the
// entry) a task it never stored.
func TestCronFireWaitsForANotDurableUniqueHolder(t *testing.T) {
	t.Parallel()
	e, d := openDiskFull(t, bolt.Config{})
	fireAt := bt.T0.Add(time.Minute)
	if _, err := e.CreateCron(t.Context(), broker.CronEntry{ID: "c", Spec: "* * * * *", Queue: "q", Type: "test", NextRun: fireAt}); err != nil {
		t.Fatal(err)
	}

	d.full.Store(true)
	holder := bt.NewTask("q")
	holder.UniqueKey = "u"
	short, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := e.Enqueue(short, broker.EnqueueParams{Now: bt.T0, Tasks: bt.WithStates([]broker.NewTask{holder}, bt.T0)}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Enqueue while the disk is full: %v, want DeadlineExceeded", err)
	}

	type fired struct {
		task *broker.Task
		err  error
	}
	done := make(chan fired, 1)
	go func() {
		nt := bt.NewTask("q")
		nt.UniqueKey = "u"
		nt.State = broker.StatePending
		task, err := e.FireCron(context.Background(), broker.CronFire{ID: "c", FireAt: fireAt, Next: fireAt.Add(time.Minute), Task: nt, Now: fireAt})
		done <- fired{task, err}
	}()
	time.Sleep(100 * time.Millisecond) // let the fire decide while the holder is not durable
	d.full.Store(false)
	var f fired
	select {
	case f = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("FireCron still waits after space returned")
	}
	if f.err == nil {
		if _, err := e.GetTask(t.Context(), f.task.ID); err != nil {
			t.Fatalf("FireCron reported task %s enqueued, but GetTask says: %v", f.task.ID, err)
		}
	} else if !errors.Is(f.err, broker.ErrAlreadyExists) {
		t.Fatalf("FireCron: %v, want ErrAlreadyExists (the holder landed) or a stored task", f.err)
	}
	c, err := e.Cron(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	if c.LastTaskID != "" {
		if _, err := e.GetTask(t.Context(), c.LastTaskID); err != nil {
			t.Fatalf("the entry's last task %s: %v", c.LastTaskID, err)
		}
	}
}
