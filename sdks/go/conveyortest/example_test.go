package conveyortest_test

import (
	"context"
	"errors"
	"testing"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/sdks/go/conveyortest"
)

// resetPassword is an application's task kind.
type resetPassword struct {
	User string `json:"user"`
}

func (resetPassword) Kind() string { return "password:reset" }

// requestReset is the application code under test: it enqueues a task.
func requestReset(ctx context.Context, c *conveyor.Client, user string) error {
	_, err := conveyor.EnqueueKind(ctx, c, resetPassword{User: user})
	return err
}

// sendReset is the handler under test.
func sendReset(_ context.Context, _ *conveyor.Delivery, r resetPassword) error {
	if r.User == "" {
		return conveyor.SkipRetry(errors.New("no user"))
	}
	return nil
}

// A test starts a server, runs the code under test against it, and
// checks what it enqueued; DrainOnce then works the tasks end to end.
func Example() {
	testRequestReset := func(t *testing.T) { // func TestRequestReset(t *testing.T) in a _test.go file
		s := conveyortest.Start(t)
		if err := requestReset(t.Context(), s.Client(), "ada"); err != nil {
			t.Fatal(err)
		}
		// The kind names the type: the payload alone finds the task.
		conveyortest.RequireEnqueued(t, s, conveyortest.Want{Payload: resetPassword{User: "ada"}})

		w := s.NewWorker()
		conveyor.HandleKind(w, sendReset)
		conveyortest.DrainOnce(t.Context(), t, s, w)
		conveyortest.RequireEnqueued(t, s, conveyortest.Want{
			Type: conveyor.KindOf[resetPassword](), State: conveyor.TaskStateCompleted, Count: 1})
	}
	_ = testRequestReset
}

// RunTask runs a handler on one task, with no server, and says how the
// attempt ends.
func ExampleRunTask() {
	testSendReset := func(t *testing.T) { // func TestSendReset(t *testing.T) in a _test.go file
		w, err := conveyor.NewPushWorker()
		if err != nil {
			t.Fatal(err)
		}
		conveyor.HandleKind(w, sendReset)
		task, err := conveyor.NewKindTask(resetPassword{})
		if err != nil {
			t.Fatal(err)
		}
		res := conveyortest.RunWorkerTask(t, w, task)
		if res.Outcome != conveyortest.OutcomeSkipRetry {
			t.Errorf("a reset with no user: %s (%s), want SKIP_RETRY", res.Outcome, res.Error)
		}
	}
	_ = testSendReset
}

// TestExamples runs the examples' tests, which the examples only show.
func TestExamples(t *testing.T) {
	t.Parallel()
	s := conveyortest.Start(t)
	if err := requestReset(t.Context(), s.Client(), "ada"); err != nil {
		t.Fatal(err)
	}
	conveyortest.RequireEnqueued(t, s, conveyortest.Want{Payload: resetPassword{User: "ada"}})
	w := s.NewWorker()
	conveyor.HandleKind(w, sendReset)
	conveyortest.DrainOnce(t.Context(), t, s, w)
	conveyortest.RequireEnqueued(t, s, conveyortest.Want{
		Type: conveyor.KindOf[resetPassword](), State: conveyor.TaskStateCompleted, Count: 1})

	pw, err := conveyor.NewPushWorker()
	if err != nil {
		t.Fatal(err)
	}
	conveyor.HandleKind(pw, sendReset)
	task, err := conveyor.NewKindTask(resetPassword{})
	if err != nil {
		t.Fatal(err)
	}
	if res := conveyortest.RunWorkerTask(t, pw, task); res.Outcome != conveyortest.OutcomeSkipRetry {
		t.Errorf("a reset with no user: %s (%s), want SKIP_RETRY", res.Outcome, res.Error)
	}
}
