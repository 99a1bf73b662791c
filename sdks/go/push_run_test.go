package conveyor_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// TestPushOutcomes pins that a pushed task's handler, with the Worker's
// middleware, answers as it would over a session: success with its result
// bytes, an error RETRY, SkipRetry SKIP_RETRY, a panic or runtime.Goexit
// RETRY, a batch handler a batch of one, an unknown type RETRY with
// ErrNoHandler, a result over 1 MiB RETRY; and that Progress does nothing.
func TestPushOutcomes(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	wrapped := map[string]int{} // task types the middleware saw
	batches := make(chan *conveyor.DeliveryBatch, 10)
	w := pushWorker(t, func(w *conveyor.Worker) {
		w.Use(func(next conveyor.Handler) conveyor.Handler {
			return conveyor.HandlerFunc(func(ctx context.Context, d *conveyor.Delivery) error {
				mu.Lock()
				wrapped[d.Type]++
				mu.Unlock()
				return next.ProcessTask(ctx, d)
			})
		})
		w.HandleFunc("ok", func(_ context.Context, d *conveyor.Delivery) error {
			d.Progress(50, "half") // no channel over push: a no-op
			d.SetResult(append([]byte("result:"), d.Payload...))
			return nil
		})
		w.HandleFunc("fail", func(context.Context, *conveyor.Delivery) error { return errors.New("boom") })
		w.HandleFunc("skip", func(context.Context, *conveyor.Delivery) error { return conveyor.SkipRetry(errors.New("hopeless")) })
		w.HandleFunc("panic", func(context.Context, *conveyor.Delivery) error { panic("kaboom") })
		w.HandleFunc("exit", func(context.Context, *conveyor.Delivery) error { runtime.Goexit(); return nil })
		w.HandleFunc("big", func(_ context.Context, d *conveyor.Delivery) error {
			d.SetResult(make([]byte, conveyor.MaxResultBytes+1))
			return nil
		})
		w.HandleBatch("batch", conveyor.BatchHandlerFunc(func(_ context.Context, b *conveyor.DeliveryBatch) error {
			batches <- b
			for _, d := range b.Tasks {
				d.SetResult(d.Payload)
			}
			return nil
		}))
		w.HandleBatch("batch.fail", conveyor.BatchHandlerFunc(func(_ context.Context, b *conveyor.DeliveryBatch) error {
			b.Fail(b.Tasks[0], conveyor.SkipRetry(errors.New("bad member")))
			return nil
		}))
	})
	k := newPushKey(t)
	e := newPushEndpoint(t, w, conveyor.WithPushSecrets(k.secret))
	const (
		success = conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS
		retry   = conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY
		skip    = conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY
	)
	for _, tc := range []struct {
		taskType string
		outcome  conveyorv1.TaskOutcome
		msg      string // contained in error_msg
		result   string
	}{
		{"ok", success, "", "result:payload"},
		{"fail", retry, "boom", ""},
		{"skip", skip, "hopeless", ""},
		{"panic", retry, "panic: kaboom", ""},
		{"exit", retry, "exited without returning (runtime.Goexit)", ""},
		{"big", retry, "result is 1048577 bytes; the limit is 1048576", ""},
		{"batch", success, "", "payload"},
		{"batch.fail", skip, "bad member", ""},
		{"no.such.type", retry, `conveyor: no handler for this task type "no.such.type" on this worker`, ""},
	} {
		r := e.send(t, newPushCall(t, tc.taskType, []byte("payload"), k)).response(t)
		if r.GetOutcome() != tc.outcome || !strings.Contains(r.GetErrorMsg(), tc.msg) || string(r.GetResult()) != tc.result ||
			(tc.msg == "") != (r.GetErrorMsg() == "") {
			t.Errorf("%s: response %v, want %v %q with result %q", tc.taskType, r, tc.outcome, tc.msg, tc.result)
		}
	}
	var b *conveyor.DeliveryBatch
	select {
	case b = <-batches: // sent before its response
	default:
		t.Fatal("the batch handler did not run")
	}
	if len(b.Tasks) != 1 || b.Group != "" || string(b.Tasks[0].Payload) != "payload" {
		t.Fatalf("batch handler got %d tasks, group %q; want a batch of one with no group", len(b.Tasks), b.Group)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]int{"ok": 1, "fail": 1, "skip": 1, "panic": 1, "exit": 1, "big": 1, "no.such.type": 1}
	if !maps.Equal(wrapped, want) {
		t.Fatalf("the middleware saw %v, want %v (every plain handler and the unknown type, no batch)", wrapped, want)
	}
}

// TestPushDelivery pins the Delivery a pushed task's handler gets.
func TestPushDelivery(t *testing.T) {
	t.Parallel()
	got := make(chan *conveyor.Delivery, 1)
	w := pushWorker(t, func(w *conveyor.Worker) {
		w.HandleFunc("inspect", func(_ context.Context, d *conveyor.Delivery) error {
			got <- d
			return nil
		})
	})
	k := newPushKey(t)
	e := newPushEndpoint(t, w, conveyor.WithPushSecrets(k.secret))
	deadline := time.Now().Add(time.Hour).Round(0)
	req := &conveyorv1.PushRequest{
		Task: &conveyorv1.TaskEnvelope{Id: "01TASK", Queue: "mail", Type: "inspect", Payload: []byte{0, 1, 2},
			ContentType: "application/octet-stream", Metadata: map[string]string{"traceparent": "00-x"}, Retried: 2,
			MaxRetry: 7, Priority: 6, AttemptId: "01ATTEMPT",
			Options: &conveyorv1.TaskOptions{Timeout: durationpb.New(2 * time.Hour), MaxRetry: 7, Priority: 6}},
		Deadline:  timestamppb.New(deadline),
		AttemptId: "01ATTEMPT",
	}
	c := &pushCall{id: "01ATTEMPT", at: time.Now(), body: marshalPush(t, req), keys: []pushKey{k}}
	if r := e.send(t, c).response(t); r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS || r.GetResult() != nil {
		t.Fatalf("response %v", r)
	}
	d := <-got
	if d.ID != "01TASK" || d.Queue != "mail" || d.Type != "inspect" || !bytes.Equal(d.Payload, []byte{0, 1, 2}) ||
		d.ContentType != "application/octet-stream" || d.Metadata["traceparent"] != "00-x" || d.Retried != 2 ||
		d.MaxRetry != 7 || d.Priority != 6 || d.AttemptID != "01ATTEMPT" || !d.Deadline.Equal(deadline) ||
		d.Options.Timeout != 2*time.Hour {
		t.Fatalf("delivery %s %s %s %x %s %v %d %d %d %s %v %s", d.ID, d.Queue, d.Type, d.Payload, d.ContentType, d.Metadata, d.Retried, d.MaxRetry, d.Priority, d.AttemptID, d.Deadline, d.Options.Timeout)
	}
}

// TestPushContext pins that the handler's context has the PushRequest's
// deadline, ends when the client goes away, and that a handler stopped by
// the deadline answers RETRY.
func TestPushContext(t *testing.T) {
	t.Parallel()
	deadlines := make(chan time.Time, 1)
	started := make(chan struct{}, 1)
	ended := make(chan error, 1)
	w := pushWorker(t, func(w *conveyor.Worker) {
		w.HandleFunc("wait", func(ctx context.Context, _ *conveyor.Delivery) error {
			dl, _ := ctx.Deadline()
			deadlines <- dl
			started <- struct{}{}
			<-ctx.Done()
			ended <- context.Cause(ctx)
			return ctx.Err()
		})
	})
	k := newPushKey(t)
	e := newPushEndpoint(t, w, conveyor.WithPushSecrets(k.secret))

	// The client goes away: the handler's context ends.
	deadline := time.Now().Add(time.Hour).Round(0)
	req := &conveyorv1.PushRequest{Task: &conveyorv1.TaskEnvelope{Id: "t1", Type: "wait"}, Deadline: timestamppb.New(deadline),
		AttemptId: "a1"}
	c := &pushCall{id: "a1", at: time.Now(), body: marshalPush(t, req), keys: []pushKey{k}}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, e.srv.URL, bytes.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	hreq.Header = c.header()
	sent := make(chan error, 1)
	go func() {
		resp, err := e.srv.Client().Do(hreq)
		if err == nil {
			_ = resp.Body.Close()
		}
		sent <- err
	}()
	if dl := <-deadlines; !dl.Equal(deadline) {
		t.Fatalf("the handler's deadline is %v, want the PushRequest's %v", dl, deadline)
	}
	<-started
	cancel()
	if err := <-sent; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client's request ended with %v, want context.Canceled", err)
	}
	select {
	case cause := <-ended:
		if !errors.Is(cause, context.Canceled) {
			t.Fatalf("the handler's context ended with %v, want context.Canceled", cause)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the handler's context did not end when the client went away")
	}

	// The deadline passes: RETRY, saying so.
	req = &conveyorv1.PushRequest{Task: &conveyorv1.TaskEnvelope{Id: "t2", Type: "wait"},
		Deadline: timestamppb.New(time.Now().Add(100 * time.Millisecond)), AttemptId: "a2"}
	c = &pushCall{id: "a2", at: time.Now(), body: marshalPush(t, req), keys: []pushKey{k}}
	r := e.send(t, c).response(t)
	<-deadlines
	<-started
	if cause := <-ended; !errors.Is(cause, context.DeadlineExceeded) ||
		r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY || r.GetErrorMsg() != "task deadline exceeded" {
		t.Fatalf("cause %v, response %v; want RETRY %q", cause, r, "task deadline exceeded")
	}
}

// TestPushOnlyWorkerRun pins that a Worker made by NewPushWorker refuses
// Run, saying it serves push only.
func TestPushOnlyWorkerRun(t *testing.T) {
	t.Parallel()
	w := echoWorker(t, nil)
	if err := w.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "serves push endpoints only") {
		t.Fatalf("Run = %v, want an error saying the Worker serves push only", err)
	}
}

// TestPushAtMostOnceReleased pins that a pushed at-most-once task (the
// server sends none) is answered RELEASED without running, saying push
// endpoints do not run such tasks, while an ordinary task of the same type
// still runs.
func TestPushAtMostOnceReleased(t *testing.T) {
	t.Parallel()
	ran := make(chan string, 2)
	w := echoWorker(t, ran)
	k := newPushKey(t)
	e := newPushEndpoint(t, w, conveyor.WithPushSecrets(k.secret))
	req := &conveyorv1.PushRequest{
		Task: &conveyorv1.TaskEnvelope{Id: "once", Type: "echo", Payload: []byte("p"), AttemptId: "a-once",
			Options: &conveyorv1.TaskOptions{AtMostOnce: true}},
		Deadline: timestamppb.New(time.Now().Add(time.Hour)), AttemptId: "a-once",
	}
	c := &pushCall{id: "a-once", at: time.Now(), body: marshalPush(t, req), keys: []pushKey{k}}
	r := e.send(t, c).response(t)
	if r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED || r.GetResult() != nil ||
		!strings.Contains(r.GetErrorMsg(), "push endpoints do not run at-most-once tasks") {
		t.Fatalf("response %v, want RELEASED saying push endpoints do not run at-most-once tasks", r)
	}
	if r := e.send(t, newPushCall(t, "echo", []byte("p"), k)).response(t); r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Fatalf("an ordinary task's response %v, want SUCCESS", r)
	}
	// The handler ran once: for the ordinary task, answered before this.
	if got := len(ran); got != 1 {
		t.Fatalf("the handler ran %d times, want once (not for the at-most-once task)", got)
	}
	if id := <-ran; id == "a-once" {
		t.Fatal("the handler ran the at-most-once task")
	}
}
