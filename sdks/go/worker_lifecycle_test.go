// A worker's life against a real server: redelivery when a stream or a
// lease ends, heartbeats, draining, shutdown, reconnecting, fatal errors.

package conveyor_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func TestWorkerStreamCloseRedeliversWithoutPenalty(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	id := e.enqueue(wtReq("sc", "block", "{}", nil))

	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	w1 := e.newWorker(conveyor.WithQueue("sc", 1))
	w1.HandleFunc("block", func(ctx context.Context, _ *conveyor.Delivery) error {
		started <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	})
	r1 := wtRun(t, w1)
	wtRecv(t, started, 10*time.Second, "the first worker starts the task")
	if err := w1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r1.wait(t, 10*time.Second); err != nil {
		t.Fatalf("Run after Close = %v, want nil", err)
	}
	if c := wtRecv(t, causes, time.Second, "the handler's cause"); !errors.Is(c, conveyor.ErrSessionLost) {
		t.Fatalf("handler context cause = %v, want ErrSessionLost", c)
	}

	got := make(chan *conveyor.Delivery, 1)
	w2 := e.newWorker(conveyor.WithQueue("sc", 1))
	w2.HandleFunc("block", func(_ context.Context, d *conveyor.Delivery) error {
		got <- d
		return nil
	})
	wtRun(t, w2)
	d := wtRecv(t, got, 10*time.Second, "the second worker gets the task")
	if d.ID != id || d.Retried != 0 {
		t.Fatalf("second worker got %s with retried %d, want %s with 0", d.ID, d.Retried, id)
	}
	e.waitState(id, conveyorv1.TaskState_TASK_STATE_COMPLETED, 10*time.Second)
}

// TestWorkerLeaseExpiryRedelivers uses a raw session that never
// heartbeats: the lease lapses, the server cancels the task on that
// session and redelivers it with its retry count incremented.
func TestWorkerLeaseExpiryRedelivers(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{LeaseTTL: time.Second})
	id := e.enqueue(wtReq("le", "t", "{}", nil))

	client := conveyorv1connect.NewWorkerServiceClient(servertest.HTTPClient(), e.srv.URL(), connect.WithGRPC())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream := client.Session(ctx)
	if err := stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Hello{Hello: &conveyorv1.Hello{
		Queues: map[string]int32{"le": 1}, Concurrency: 1, SdkVersion: "raw-test"}}}); err != nil {
		t.Fatal(err)
	}
	frames := make(chan *conveyorv1.ServerMessage, 16)
	go func() {
		defer close(frames)
		for {
			m, err := stream.Receive()
			if err != nil {
				return
			}
			frames <- m
		}
	}()
	next := func(what string) *conveyorv1.ServerMessage {
		t.Helper()
		select {
		case m, ok := <-frames:
			if !ok {
				t.Fatalf("stream ended waiting for %s", what)
			}
			return m
		case <-time.After(10 * time.Second):
			t.Fatalf("no frame within 10s waiting for %s", what)
		}
		return nil
	}
	if next("Welcome").GetWelcome() == nil {
		t.Fatal("first frame is not Welcome")
	}
	d := next("the first Dispatch").GetDispatch()
	if d.GetTask().GetId() != id || d.GetTask().GetRetried() != 0 {
		t.Fatalf("first dispatch %v, want task %s with retried 0", d, id)
	}
	if c := next("the Cancel").GetCancel(); c.GetTaskId() != id {
		t.Fatalf("after the lapse got %v, want Cancel for %s", c, id)
	}
	// Answer for the lapsed attempt, as a conforming worker does; the
	// server drops it.
	if err := stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: id, Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY, ErrorMsg: "canceled"}}}); err != nil {
		t.Fatal(err)
	}
	d = next("the redelivery").GetDispatch()
	if d.GetTask().GetId() != id || d.GetTask().GetRetried() != 1 {
		t.Fatalf("redelivery %v, want task %s with retried 1", d, id)
	}
	if err := stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: id, Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}}}); err != nil {
		t.Fatal(err)
	}
	info := e.waitState(id, conveyorv1.TaskState_TASK_STATE_COMPLETED, 10*time.Second)
	if info.GetRetried() != 1 {
		t.Fatalf("completed with retried %d, want 1", info.GetRetried())
	}
	_ = stream.CloseRequest()
}

func TestWorkerHeartbeatsKeepLongTaskAlive(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{LeaseTTL: time.Second})
	id := e.enqueue(wtReq("hb", "long", "{}", nil))
	var canceled atomic.Bool
	w := e.newWorker(conveyor.WithQueue("hb", 1))
	w.HandleFunc("long", func(ctx context.Context, d *conveyor.Delivery) error {
		select {
		case <-time.After(3 * time.Second): // three lease TTLs of work
			return nil
		case <-ctx.Done():
			canceled.Store(true)
			return context.Cause(ctx)
		}
	})
	wtRun(t, w)
	info := e.waitState(id, conveyorv1.TaskState_TASK_STATE_COMPLETED, 15*time.Second)
	if info.GetRetried() != 0 || canceled.Load() {
		t.Fatalf("completed with retried %d (canceled %v), want 0 and not canceled", info.GetRetried(), canceled.Load())
	}
}

func TestWorkerDrainReleases(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	id := e.enqueue(wtReq("dr", "block", "{}", nil))

	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	w1 := e.newWorker(conveyor.WithQueue("dr", 1), conveyor.WithDrainGrace(100*time.Millisecond))
	w1.HandleFunc("block", func(ctx context.Context, _ *conveyor.Delivery) error {
		started <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return errors.New("interrupted") // an error because of the drain: still RELEASED
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w1.Run(ctx) }()
	t.Cleanup(func() { _ = w1.Close() })
	wtRecv(t, started, 10*time.Second, "the task starts")
	cancel()
	if err := wtRecv(t, done, 15*time.Second, "Run returns after the drain"); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	if c := wtRecv(t, causes, time.Second, "the cause"); !errors.Is(c, conveyor.ErrWorkerShutdown) {
		t.Fatalf("cause = %v, want ErrWorkerShutdown", c)
	}
	info := e.get(id)
	if info.GetState() != conveyorv1.TaskState_TASK_STATE_PENDING || info.GetRetried() != 0 {
		t.Fatalf("after the drain the task is %s with retried %d, want PENDING with 0", info.GetState(), info.GetRetried())
	}

	w2 := e.newWorker(conveyor.WithQueue("dr", 1))
	w2.HandleFunc("block", func(context.Context, *conveyor.Delivery) error { return nil })
	wtRun(t, w2)
	info = e.waitState(id, conveyorv1.TaskState_TASK_STATE_COMPLETED, 10*time.Second)
	if info.GetRetried() != 0 {
		t.Fatalf("completed with retried %d, want 0", info.GetRetried())
	}
}

// TestWorkerDrainReleasesHandlersThatDoNotReturn: a handler abandoned by
// the drain that panics, or ends with runtime.Goexit, is released like
// one that returns an error: its task back to PENDING with no retry.
func TestWorkerDrainReleasesHandlersThatDoNotReturn(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		unwind func()
	}{
		{"panic", func() { panic("unwinding on shutdown") }},
		{"Goexit", runtime.Goexit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := wtSetup(t, server.Config{})
			id := e.enqueue(wtReq("dx", "block", "{}", nil))
			started := make(chan struct{}, 1)
			w := e.newWorker(conveyor.WithQueue("dx", 1), conveyor.WithDrainGrace(50*time.Millisecond))
			w.HandleFunc("block", func(ctx context.Context, _ *conveyor.Delivery) error {
				started <- struct{}{}
				<-ctx.Done()
				if !errors.Is(context.Cause(ctx), conveyor.ErrWorkerShutdown) {
					return context.Cause(ctx)
				}
				tc.unwind()
				return nil
			})
			r := wtRun(t, w)
			wtRecv(t, started, 10*time.Second, "the task starts")
			if err := w.Shutdown(context.Background()); err != nil {
				t.Fatalf("Shutdown = %v", err)
			}
			if err := r.wait(t, time.Second); err != nil {
				t.Fatalf("Run = %v", err)
			}
			info := e.get(id)
			if info.GetState() != conveyorv1.TaskState_TASK_STATE_PENDING || info.GetRetried() != 0 {
				t.Fatalf("after the drain the task is %s with retried %d (%q), want PENDING with 0",
					info.GetState(), info.GetRetried(), info.GetLastError())
			}
		})
	}
}

func TestWorkerDrainLetsRunningTasksFinish(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	id := e.enqueue(wtReq("fin", "work", "{}", nil))
	started := make(chan struct{}, 1)
	release := make(chan struct{})
	w := e.newWorker(conveyor.WithQueue("fin", 1), conveyor.WithDrainGrace(10*time.Second))
	w.HandleFunc("work", func(ctx context.Context, d *conveyor.Delivery) error {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		d.SetResult([]byte("finished"))
		return nil
	})
	r := wtRun(t, w)
	wtRecv(t, started, 10*time.Second, "the task starts")
	shut := make(chan error, 1)
	go func() { shut <- w.Shutdown(context.Background()) }()
	close(release)
	if err := wtRecv(t, shut, 15*time.Second, "Shutdown returns"); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if err := r.wait(t, time.Second); err != nil {
		t.Fatalf("Run = %v", err)
	}
	info := e.get(id)
	if info.GetState() != conveyorv1.TaskState_TASK_STATE_COMPLETED || string(info.GetResult()) != "finished" {
		t.Fatalf("task is %s with result %q, want COMPLETED with %q", info.GetState(), info.GetResult(), "finished")
	}
}

func TestWorkerShutdownContextCutsDrainShort(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	id := e.enqueue(wtReq("cut", "block", "{}", nil))
	started := make(chan struct{}, 1)
	w := e.newWorker(conveyor.WithQueue("cut", 1)) // default grace: 30s
	w.HandleFunc("block", func(ctx context.Context, _ *conveyor.Delivery) error {
		started <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	wtRun(t, w)
	wtRecv(t, started, 10*time.Second, "the task starts")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	begin := time.Now()
	if err := w.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want context.DeadlineExceeded", err)
	}
	if el := time.Since(begin); el > 10*time.Second {
		t.Fatalf("Shutdown took %s", el)
	}
	servertest.Eventually(t, 10*time.Second, "task released", func() bool {
		info := e.get(id)
		return info.GetState() == conveyorv1.TaskState_TASK_STATE_PENDING && info.GetRetried() == 0
	})
}

// TestWorkerShutdownContextEndStillReports: when Shutdown's context ends,
// the handlers it cancels are still reported before the stream closes, so
// one that finishes as it is canceled keeps its result.
func TestWorkerShutdownContextEndStillReports(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	id := e.enqueue(wtReq("ab", "work", "{}", nil))
	started := make(chan struct{}, 1)
	causes := make(chan error, 1)
	finish := make(chan struct{})
	wrapUp := sync.OnceFunc(func() { close(finish) })
	w := e.newWorker(conveyor.WithQueue("ab", 1)) // default grace: 30s
	w.HandleFunc("work", func(ctx context.Context, d *conveyor.Delivery) error {
		started <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		<-finish // the work in hand takes a moment to wrap up
		d.SetResult([]byte("finished"))
		return nil
	})
	r := wtRun(t, w)
	t.Cleanup(wrapUp) // before the worker's cleanup, should the test fail first
	wtRecv(t, started, 10*time.Second, "the task starts")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // Shutdown's context has ended already
	shut := make(chan error, 1)
	go func() { shut <- w.Shutdown(ctx) }()
	if c := wtRecv(t, causes, 10*time.Second, "the handler's cancellation"); !errors.Is(c, conveyor.ErrWorkerShutdown) {
		t.Fatalf("cause = %v, want ErrWorkerShutdown", c)
	}
	wrapUp()
	if err := wtRecv(t, shut, 15*time.Second, "Shutdown returns"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown = %v, want context.Canceled", err)
	}
	if err := r.wait(t, time.Second); err != nil {
		t.Fatalf("Run = %v", err)
	}
	info := e.get(id)
	if info.GetState() != conveyorv1.TaskState_TASK_STATE_COMPLETED || string(info.GetResult()) != "finished" {
		t.Fatalf("task is %s with result %q, want COMPLETED with %q (its result was dropped)", info.GetState(), info.GetResult(), "finished")
	}
}

func TestWorkerReconnectsAfterServerRestart(t *testing.T) {
	t.Parallel()
	e := wtSetup(t, server.Config{})
	got := make(chan string, 4)
	w := e.newWorker(conveyor.WithQueue("rs", 1))
	w.HandleFunc("t", func(_ context.Context, d *conveyor.Delivery) error {
		got <- string(d.Payload)
		return nil
	})
	r := wtRun(t, w)
	before := e.enqueue(wtReq("rs", "t", `"before"`, nil))
	if p := wtRecv(t, got, 10*time.Second, "the task before the restart"); p != `"before"` {
		t.Fatalf("got %s", p)
	}
	e.waitState(before, conveyorv1.TaskState_TASK_STATE_COMPLETED, 10*time.Second)

	e.srv = servertest.Restart(t, e.srv)
	e.connect()
	id := e.enqueue(wtReq("rs", "t", `"after"`, nil))
	if p := wtRecv(t, got, 15*time.Second, "the task after the restart"); p != `"after"` {
		t.Fatalf("got %s", p)
	}
	e.waitState(id, conveyorv1.TaskState_TASK_STATE_COMPLETED, 10*time.Second)
	select {
	case <-r.done:
		t.Fatalf("Run returned %v", r.err)
	default:
	}
}

func TestWorkerFatalErrorsEndRun(t *testing.T) {
	t.Parallel()
	t.Run("unauthenticated", func(t *testing.T) {
		t.Parallel()
		e := wtSetup(t, server.Config{Token: "s3cret"})
		w := e.newWorker()
		w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error { return nil })
		err := wtRun(t, w).wait(t, 10*time.Second)
		if connect.CodeOf(err) != connect.CodeUnauthenticated || !errors.Is(err, conveyor.ErrUnauthenticated) {
			t.Fatalf("Run = %v, want unauthenticated matching ErrUnauthenticated", err)
		}

		ok := e.newWorker(conveyor.WithToken("s3cret"), conveyor.WithQueue("auth", 1))
		done := make(chan struct{})
		ok.HandleFunc("t", func(context.Context, *conveyor.Delivery) error { close(done); return nil })
		wtRun(t, ok)
		e.enqueue(wtReq("auth", "t", "{}", nil))
		wtRecv(t, done, 10*time.Second, "the authenticated worker runs a task")
	})
	t.Run("invalid argument", func(t *testing.T) {
		t.Parallel()
		e := wtSetup(t, server.Config{Version: "v1.0.0"})
		w := e.newWorker(conveyor.WithMinServerVersion("v99.0.0"))
		w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error { return nil })
		err := wtRun(t, w).wait(t, 10*time.Second)
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "v99.0.0") {
			t.Fatalf("Run = %v, want invalid_argument naming v99.0.0", err)
		}
	})
}
