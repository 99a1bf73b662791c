package conveyortest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/sdks/go/conveyortest"
)

func TestRunTaskOutcomes(t *testing.T) {
	t.Parallel()
	task := conveyor.NewTask("t", []byte(`{}`))
	for _, tc := range []struct {
		name    string
		handler conveyor.HandlerFunc
		want    conveyortest.Result
	}{
		{"success with a result", func(_ context.Context, d *conveyor.Delivery) error {
			d.SetResult([]byte("done"))
			return nil
		}, conveyortest.Result{Outcome: conveyortest.OutcomeSuccess, Result: []byte("done")}},
		{"an error", func(context.Context, *conveyor.Delivery) error {
			return errors.New("flaky")
		}, conveyortest.Result{Outcome: conveyortest.OutcomeRetry, Error: "flaky"}},
		{"SkipRetry", func(context.Context, *conveyor.Delivery) error {
			return conveyor.SkipRetry(errors.New("bad input"))
		}, conveyortest.Result{Outcome: conveyortest.OutcomeSkipRetry, Error: "bad input"}},
		{"a panic", func(context.Context, *conveyor.Delivery) error {
			panic("boom")
		}, conveyortest.Result{Outcome: conveyortest.OutcomeRetry, Error: "panic: boom"}},
		{"a result dropped by an error", func(_ context.Context, d *conveyor.Delivery) error {
			d.SetResult([]byte("partial"))
			return errors.New("late failure")
		}, conveyortest.Result{Outcome: conveyortest.OutcomeRetry, Error: "late failure"}},
	} {
		got := conveyortest.RunTask(t, tc.handler, task)
		if got.Outcome != tc.want.Outcome || got.Error != tc.want.Error || string(got.Result) != string(tc.want.Result) {
			t.Errorf("%s: RunTask = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestRunTaskOversizedResult(t *testing.T) {
	t.Parallel()
	got := conveyortest.RunTask(t, conveyor.HandlerFunc(func(_ context.Context, d *conveyor.Delivery) error {
		d.SetResult(make([]byte, conveyor.MaxResultBytes+1))
		return nil
	}), conveyor.NewTask("t", nil))
	if got.Outcome != conveyortest.OutcomeRetry || !strings.Contains(got.Error, "the limit is") || got.Result != nil {
		t.Errorf("RunTask with an oversized result = %v %q, want RETRY naming the limit", got.Outcome, got.Error)
	}
}

// TestRunTaskDelivery checks that a task's options reach the handler as
// from a server.
func TestRunTaskDelivery(t *testing.T) {
	t.Parallel()
	var got *conveyor.Delivery
	var deadline time.Time
	var hasDeadline bool
	task := conveyor.NewTask("resize", []byte(`{"w":1}`), conveyor.Queue("images"), conveyor.MetadataKV("k", "v"),
		conveyor.MaxRetry(3), conveyor.Priority(8), conveyor.Timeout(time.Minute), conveyor.TaskID("01J00000000000000000000000"))
	before := time.Now()
	res := conveyortest.RunTask(t, conveyor.HandlerFunc(func(ctx context.Context, d *conveyor.Delivery) error {
		got = d
		deadline, hasDeadline = ctx.Deadline()
		return nil
	}), task, conveyortest.WithRetried(2))
	if res.Outcome != conveyortest.OutcomeSuccess {
		t.Fatalf("RunTask = %+v, want success", res)
	}
	if got.ID != "01J00000000000000000000000" || got.Queue != "images" || got.Type != "resize" ||
		string(got.Payload) != `{"w":1}` || got.ContentType != "application/json" || got.Metadata["k"] != "v" ||
		got.Retried != 2 || got.MaxRetry != 3 || got.Priority != 8 || got.Options.Timeout != time.Minute || got.AttemptID == "" {
		t.Errorf("the handler saw %+v", got)
	}
	if !hasDeadline || deadline.Before(before.Add(time.Minute)) || deadline.After(time.Now().Add(time.Minute)) {
		t.Errorf("the handler's context has deadline %v (set %v), want a minute from its start", deadline, hasDeadline)
	}

	// Without options, the server's defaults.
	conveyortest.RunTask(t, conveyor.HandlerFunc(func(_ context.Context, d *conveyor.Delivery) error {
		got = d
		return nil
	}), conveyor.NewTask("resize", nil))
	if got.ID == "" || got.Queue != "default" || got.MaxRetry != 25 || got.Priority != 4 || got.Retried != 0 {
		t.Errorf("the handler saw %+v, want the server's defaults", got)
	}
}

func TestRunTaskContext(t *testing.T) {
	t.Parallel()
	type key struct{}
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), key{}, "value"))
	cancel()
	got := conveyortest.RunTask(t, conveyor.HandlerFunc(func(ctx context.Context, _ *conveyor.Delivery) error {
		if ctx.Value(key{}) != "value" {
			return conveyor.SkipRetry(errors.New("no value"))
		}
		return ctx.Err()
	}), conveyor.NewTask("t", nil), conveyortest.WithContext(ctx))
	if got.Outcome != conveyortest.OutcomeRetry || got.Error != context.Canceled.Error() {
		t.Errorf("RunTask with a canceled context = %+v, want RETRY with the context's error", got)
	}
}

// TestRunWorkerTask runs a Worker's own registrations: a kind, its
// middleware, and a type it has no handler for.
func TestRunWorkerTask(t *testing.T) {
	t.Parallel()
	w, err := conveyor.NewPushWorker()
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	w.Use(func(next conveyor.Handler) conveyor.Handler {
		return conveyor.HandlerFunc(func(ctx context.Context, d *conveyor.Delivery) error {
			seen = append(seen, d.Type)
			return next.ProcessTask(ctx, d)
		})
	})
	var to string
	conveyor.HandleKind(w, func(_ context.Context, _ *conveyor.Delivery, v welcome) error {
		to = v.To
		return nil
	})

	task, err := conveyor.NewKindTask(welcome{To: "a@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if got := conveyortest.RunWorkerTask(t, w, task); got.Outcome != conveyortest.OutcomeSuccess || to != "a@example.com" {
		t.Errorf("RunWorkerTask(kind) = %+v, handler saw %q; want success with the decoded payload", got, to)
	}
	bad := conveyor.NewTask(conveyor.KindOf[welcome](), []byte(`{"to": 5}`))
	if got := conveyortest.RunWorkerTask(t, w, bad); got.Outcome != conveyortest.OutcomeSkipRetry ||
		!strings.Contains(got.Error, "decode the JSON payload") {
		t.Errorf("RunWorkerTask(undecodable) = %+v, want SKIP_RETRY with a decode error", got)
	}
	got := conveyortest.RunWorkerTask(t, w, conveyor.NewTask("unknown", nil))
	if got.Outcome != conveyortest.OutcomeRetry || !strings.Contains(got.Error, conveyor.ErrNoHandler.Error()) {
		t.Errorf("RunWorkerTask(unknown type) = %+v, want RETRY with ErrNoHandler", got)
	}
	if strings.Join(seen, ",") != "email:welcome,email:welcome,unknown" {
		t.Errorf("the middleware saw %v, want every task", seen)
	}
}

func TestRunTaskRefusals(t *testing.T) {
	t.Parallel()
	ok := conveyor.HandlerFunc(func(context.Context, *conveyor.Delivery) error { return nil })
	msg := failure(t, func(tb testing.TB) { conveyortest.RunTask(tb, ok, conveyor.NewTask("t", nil, conveyor.AtMostOnce())) })
	contains(t, "an AtMostOnce task", msg, "does not run an AtMostOnce task")
	msg = failure(t, func(tb testing.TB) { conveyortest.RunTask(tb, ok, conveyor.NewTask("", nil)) })
	contains(t, "a task with no type", msg, "a task with a type")
	w, err := conveyor.NewPushWorker()
	if err != nil {
		t.Fatal(err)
	}
	msg = failure(t, func(tb testing.TB) { conveyortest.RunWorkerTask(tb, w, conveyor.NewTask("t", nil)) })
	contains(t, "a worker with no handler", msg, "no handlers")
}

// TestRunTaskAgreesWithTheServer runs the same handlers on a real server
// and checks that each task ends as RunTask's outcome says it would.
func TestRunTaskAgreesWithTheServer(t *testing.T) {
	t.Parallel()
	handlers := map[string]conveyor.HandlerFunc{
		"ok":    func(context.Context, *conveyor.Delivery) error { return nil },
		"skip":  func(context.Context, *conveyor.Delivery) error { return conveyor.SkipRetry(errors.New("no")) },
		"retry": func(context.Context, *conveyor.Delivery) error { return errors.New("again") },
		"panic": func(context.Context, *conveyor.Delivery) error { panic("boom") },
	}
	states := map[conveyortest.Outcome]conveyor.TaskState{
		conveyortest.OutcomeSuccess:   conveyor.TaskStateCompleted,
		conveyortest.OutcomeSkipRetry: conveyor.TaskStateArchived,
		conveyortest.OutcomeRetry:     conveyor.TaskStateRetry,
	}
	s := conveyortest.Start(t)
	w := s.NewWorker()
	c := s.Client()
	for typ, h := range handlers {
		w.Handle(typ, h)
		enqueue(t, c, typ, `{}`, conveyor.RetryPolicy(conveyor.RetryStrategyFixed, time.Hour, 0))
	}
	conveyortest.DrainOnce(context.Background(), t, s, w)
	for typ, h := range handlers {
		res := conveyortest.RunTask(t, h, conveyor.NewTask(typ, []byte(`{}`)))
		got := conveyortest.RequireEnqueued(t, s, conveyortest.Want{Type: typ, Count: 1})[0]
		if got.State != states[res.Outcome] || got.LastError != res.Error {
			t.Errorf("%s: the server has %s with %q; RunTask said %s with %q", typ, got.State, got.LastError, res.Outcome, res.Error)
		}
	}
}
