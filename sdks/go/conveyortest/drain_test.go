package conveyortest_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/sdks/go/conveyortest"
)

func TestDrainOnce(t *testing.T) {
	t.Parallel()
	s := conveyortest.Start(t)
	c := s.Client()
	w := s.NewWorker(conveyor.WithQueue("default", 1), conveyor.WithQueue("mail", 1))
	var ran atomic.Int32
	conveyor.HandleKind(w, func(ctx context.Context, _ *conveyor.Delivery, v welcome) error {
		ran.Add(1)
		// A task enqueued by a handler is not waited for.
		_, err := c.Enqueue(ctx, "later", []byte(`{}`))
		return err
	})
	w.HandleFunc("later", func(context.Context, *conveyor.Delivery) error { return nil })
	for _, to := range []string{"a", "b", "c"} {
		if _, err := conveyor.EnqueueKind(context.Background(), c, welcome{To: to}); err != nil {
			t.Fatal(err)
		}
	}
	scheduled := enqueue(t, c, "later", `{}`, conveyor.ProcessIn(time.Hour))

	conveyortest.DrainOnce(context.Background(), t, s, w)
	if n := ran.Load(); n != 3 {
		t.Errorf("the handler ran %d times, want 3", n)
	}
	conveyortest.RequireEnqueued(t, s, conveyortest.Want{Type: "email:welcome", State: conveyor.TaskStateCompleted, Count: 3})
	conveyortest.RequireNotEnqueued(t, s, conveyortest.Want{Type: "email:welcome", State: conveyor.TaskStatePending})
	got := conveyortest.RequireEnqueued(t, s, conveyortest.Want{Type: "later", State: conveyor.TaskStateScheduled})
	if len(got) != 1 || got[0].ID != scheduled.ID {
		t.Errorf("scheduled tasks %v, want %s untouched", got, scheduled.ID)
	}
}

func TestDrainOnceNothingWaiting(t *testing.T) {
	t.Parallel()
	s := conveyortest.Start(t)
	w := s.NewWorker()
	w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error { return nil })
	conveyortest.DrainOnce(context.Background(), t, s, w)
}

func TestDrainOnceFailures(t *testing.T) {
	t.Parallel()
	s := conveyortest.Start(t)
	// A task of a queue the worker does not serve waits until the
	// context ends, and the failure names it.
	info := enqueue(t, s.Client(), "t", `{}`, conveyor.Queue("elsewhere"))
	w := s.NewWorker()
	w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error { return nil })
	msg := failure(t, func(tb testing.TB) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		conveyortest.DrainOnce(ctx, tb, s, w)
	})
	contains(t, "the failure on a timeout", msg, "1 tasks still PENDING or ACTIVE", info.ID+" queue=elsewhere type=t state=pending")

	// A worker that cannot run (no handler) fails at once.
	msg = failure(t, func(tb testing.TB) { conveyortest.DrainOnce(context.Background(), tb, s, s.NewWorker()) })
	contains(t, "the failure of a worker that stops", msg, "the worker stopped", "no handlers")
}
