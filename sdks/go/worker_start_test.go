package conveyor_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// The tests in this file pin the worker's side of routing and start
// authorization at the frame level, from the scripted peer of
// worker_fake_test.go: what the Hello declares, and what the worker sends
// and runs around a Dispatch with start_required, whichever of the
// StartDecision, a Cancel, a drain or the stream's end comes first.

// wtOnceDispatch is the Dispatch of an at-most-once task: start_required,
// with its attempt id.
func wtOnceDispatch(id, attempt, typ, payload string) *conveyorv1.ServerMessage {
	return &conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Dispatch{Dispatch: &conveyorv1.Dispatch{
		Task: &conveyorv1.TaskEnvelope{Id: id, Queue: "default", Type: typ, Payload: []byte(payload),
			ContentType: "application/json", AttemptId: attempt, Options: &conveyorv1.TaskOptions{AtMostOnce: true}},
		Deadline:      timestamppb.New(time.Now().Add(time.Hour)),
		AttemptId:     attempt,
		StartRequired: true,
	}}}
}

func wtDecision(attempt string, authorized bool, reason string) *conveyorv1.ServerMessage {
	return &conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_StartDecision{StartDecision: &conveyorv1.StartDecision{
		AttemptId: attempt, Authorized: authorized, Reason: reason}}}
}

func wtIsStart(attempt string) func(*conveyorv1.WorkerMessage) bool {
	return func(m *conveyorv1.WorkerMessage) bool {
		return m.GetStart() != nil && m.GetStart().GetAttemptId() == attempt
	}
}

// wtIsHeartbeatOfAttempts matches a heartbeat listing exactly the task ids
// ids and the attempt ids attempts.
func wtIsHeartbeatOfAttempts(ids, attempts []string) func(*conveyorv1.WorkerMessage) bool {
	ids, attempts = slices.Sorted(slices.Values(ids)), slices.Sorted(slices.Values(attempts))
	return func(m *conveyorv1.WorkerMessage) bool {
		hb := m.GetHeartbeat()
		return hb != nil && slices.Equal(slices.Sorted(slices.Values(hb.GetActiveTaskIds())), ids) &&
			slices.Equal(slices.Sorted(slices.Values(hb.GetActiveAttemptIds())), attempts)
	}
}

// wtNoStart fails the test on a Start frame, and on a Result.
func wtNoStart(t *testing.T) func(*conveyorv1.WorkerMessage) {
	return func(m *conveyorv1.WorkerMessage) {
		t.Helper()
		if s := m.GetStart(); s != nil {
			t.Fatalf("unexpected start %v", s)
		}
		wtNoResult(t)(m)
	}
}

// wtNotStarted fails the test if the handler has started a task.
func wtNotStarted(t *testing.T, b *wtBlocker) {
	t.Helper()
	select {
	case got := <-b.started:
		t.Fatalf("%s ran", got)
	default:
	}
}

// TestWorkerFakeHelloRouting: the Hello lists every handled type (plain,
// JSON and batch) sorted, names the release given by the option, and asks
// for start authorization.
func TestWorkerFakeHelloRouting(t *testing.T) {
	t.Parallel()
	f := &wtFake{}
	url := wtStartFake(t, f)
	w := wtNewWorker(t, url, conveyor.WithReleaseID("build-42"))
	noop := func(context.Context, *conveyor.Delivery) error { return nil }
	w.HandleFunc("mail.send", noop)
	conveyor.HandleJSON(w, "b.json", func(context.Context, *conveyor.Delivery, struct{}) error { return nil })
	w.HandleBatch("a.batch", conveyor.BatchHandlerFunc(func(context.Context, *conveyor.DeliveryBatch) error { return nil }))
	w.HandleFunc("c", noop)
	wtRun(t, w)
	h := f.session(t).hello
	if want := []string{"a.batch", "b.json", "c", "mail.send"}; !slices.Equal(h.GetTypes(), want) {
		t.Errorf("hello.types = %v, want %v", h.GetTypes(), want)
	}
	if !slices.Equal(h.GetBatchTypes(), []string{"a.batch"}) {
		t.Errorf("hello.batch_types = %v, want [a.batch]", h.GetBatchTypes())
	}
	if h.GetReleaseId() != "build-42" || !h.GetStartAuthorization() {
		t.Errorf("hello release_id %q, start_authorization %v; want build-42, true", h.GetReleaseId(), h.GetStartAuthorization())
	}
}

// TestWorkerFakeHelloReleaseFromEnv: without WithReleaseID the release is
// CONVEYOR_RELEASE_ID; WithReleaseID, even empty, overrides it. (Not
// parallel: it sets the environment.)
func TestWorkerFakeHelloReleaseFromEnv(t *testing.T) {
	t.Setenv(conveyor.EnvReleaseID, "from-env")
	for _, tc := range []struct {
		name string
		opts []conveyor.WorkerOption
		want string
	}{
		{"env", nil, "from-env"},
		{"option", []conveyor.WorkerOption{conveyor.WithReleaseID("from-option")}, "from-option"},
		{"empty option", []conveyor.WorkerOption{conveyor.WithReleaseID("")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &wtFake{}
			url := wtStartFake(t, f)
			w := wtNewWorker(t, url, tc.opts...)
			w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error { return nil })
			wtRun(t, w)
			if got := f.session(t).hello.GetReleaseId(); got != tc.want {
				t.Fatalf("hello.release_id = %q, want %q", got, tc.want)
			}
		})
	}
	t.Setenv(conveyor.EnvReleaseID, strings.Repeat("r", 1025))
	if _, err := conveyor.NewWorker("http://127.0.0.1:1"); err == nil || !strings.Contains(err.Error(), conveyor.EnvReleaseID) {
		t.Errorf("NewWorker with a CONVEYOR_RELEASE_ID over the bound = %v, want an error naming it", err)
	}
}

// TestWorkerHandleBadType: a type no task can have (not UTF-8, which would
// leave the Hello unencodable, or over 1,024 bytes) is a programmer error.
func TestWorkerHandleBadType(t *testing.T) {
	t.Parallel()
	w, err := conveyor.NewWorker("http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	noop := func(context.Context, *conveyor.Delivery) error { return nil }
	for _, typ := range []string{"", "a\xff", strings.Repeat("t", 1025)} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Handle(%.20q) did not panic", typ)
				}
			}()
			w.HandleFunc(typ, noop)
		}()
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("HandleBatch(%.20q) did not panic", typ)
				}
			}()
			w.HandleBatch(typ, conveyor.BatchHandlerFunc(func(context.Context, *conveyor.DeliveryBatch) error { return nil }))
		}()
	}
	w.HandleFunc(strings.Repeat("t", 1024), noop) // at the bound: fine
}

// TestWorkerFakeUnroutedType: a server that does not route by type (one
// older than routing) may still send a type the worker has no handler
// for: it is failed with ErrNoHandler, to be retried elsewhere.
func TestWorkerFakeUnroutedType(t *testing.T) {
	t.Parallel()
	f := &wtFake{}
	url := wtStartFake(t, f)
	w := wtNewWorker(t, url)
	w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error { return nil })
	wtRun(t, w)
	s := f.session(t)
	s.send(wtDispatch("X", "nobody", "{}", nil, time.Now().Add(time.Hour)))
	r := s.next("X's result", wtIsResult("X"), nil).GetResult()
	if r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY || !strings.Contains(r.GetErrorMsg(), `no handler for this task type "nobody"`) {
		t.Fatalf("X's result = %v, want RETRY for no handler", r)
	}
}

// wtStartBundle is a worker of concurrency 2 whose handler of type "t" is
// a wtBlocker, on a fake session.
type wtStartBundle struct {
	s *wtFakeSession
	f *wtFake
	b *wtBlocker
	w *conveyor.Worker
}

func wtStartSetup(t *testing.T, opts ...conveyor.WorkerOption) *wtStartBundle {
	t.Helper()
	f := &wtFake{}
	url := wtStartFake(t, f)
	b := newWTBlocker()
	w := wtNewWorker(t, url, append([]conveyor.WorkerOption{conveyor.WithConcurrency(2)}, opts...)...)
	w.Handle("t", b)
	wtRun(t, w)
	return &wtStartBundle{s: f.session(t), f: f, b: b, w: w}
}

// TestWorkerFakeStartAuthorized: the worker sends Start with the attempt
// id, keeps the task in its heartbeats and runs nothing until the
// decision; a decision for an attempt it does not await is ignored; once
// authorized the handler runs (seeing AtMostOnce) and its Result is sent.
func TestWorkerFakeStartAuthorized(t *testing.T) {
	t.Parallel()
	e := wtStartSetup(t)
	s := e.s
	var opts conveyor.TaskOptions
	e.w.Use(func(next conveyor.Handler) conveyor.Handler {
		return conveyor.HandlerFunc(func(ctx context.Context, d *conveyor.Delivery) error {
			opts = d.Options
			return next.ProcessTask(ctx, d)
		})
	})
	s.send(wtOnceDispatch("A", "a1", "t", `"ok"`))
	s.next("A's Start", wtIsStart("a1"), wtNoResult(t))
	s.send(wtDecision("stranger", true, "")) // not awaited: ignored
	s.next("a heartbeat listing A and its attempt", wtIsHeartbeatOfAttempts([]string{"A"}, []string{"a1"}), wtNoResult(t))
	s.next("another one", wtIsHeartbeatOfAttempts([]string{"A"}, []string{"a1"}), wtNoResult(t))
	wtNotStarted(t, e.b)

	s.send(wtDecision("a1", true, ""))
	if got := wtRecv(t, e.b.started, 10*time.Second, "A runs"); got != `A:"ok"` {
		t.Fatalf("started %s", got)
	}
	r := s.next("A's result", wtIsResult("A"), nil).GetResult()
	if r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS || r.GetAttemptId() != "a1" {
		t.Fatalf("A's result = %v, want SUCCESS for attempt a1", r)
	}
	if !opts.AtMostOnce {
		t.Error("the handler's Delivery.Options.AtMostOnce is false")
	}
	// An ordinary task next to it asks nothing.
	s.send(wtDispatch("B", "t", `"ok"`, nil, time.Now().Add(time.Hour)))
	s.next("B's result", wtIsResult("B"), wtNoStart(t))
}

// TestWorkerFakeStartRefused: a refused start is not run, gets no Result,
// and is forgotten: heartbeats stop listing it; a late decision for it is
// ignored.
func TestWorkerFakeStartRefused(t *testing.T) {
	t.Parallel()
	e := wtStartSetup(t)
	s := e.s
	s.send(wtOnceDispatch("A", "a1", "t", `"ok"`))
	s.next("A's Start", wtIsStart("a1"), wtNoResult(t))
	s.send(wtDecision("a1", false, "lease lapsed"))
	s.next("a heartbeat without A", wtIsHeartbeatOfAttempts(nil, nil), wtNoResult(t))
	s.send(wtDecision("a1", true, "")) // no longer awaited
	s.next("another heartbeat without A", wtIsHeartbeatOfAttempts(nil, nil), wtNoResult(t))
	s.next("and another", wtIsHeartbeatOfAttempts(nil, nil), wtNoResult(t))
	wtNotStarted(t, e.b)
}

// TestWorkerFakeStartCanceled: a Cancel before the decision: not run, the
// attempt answered RELEASED; the decision that follows is ignored.
func TestWorkerFakeStartCanceled(t *testing.T) {
	t.Parallel()
	e := wtStartSetup(t)
	s := e.s
	s.send(wtOnceDispatch("A", "a1", "t", `"ok"`))
	s.next("A's Start", wtIsStart("a1"), wtNoResult(t))
	s.send(wtCancel("A"))
	r := s.next("A's result", wtIsResult("A"), nil).GetResult()
	if r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED || r.GetAttemptId() != "a1" {
		t.Fatalf("A's result = %v, want RELEASED for attempt a1", r)
	}
	s.send(wtDecision("a1", true, ""))
	s.next("a heartbeat without A", wtIsHeartbeatOfAttempts(nil, nil), wtNoResult(t))
	s.next("another one", wtIsHeartbeatOfAttempts(nil, nil), wtNoResult(t))
	wtNotStarted(t, e.b)
}

// TestWorkerFakeStartStreamLost: the stream ends before the decision: the
// task is not run, nor after the reconnect, where a decision for its
// attempt is ignored and nothing is answered for it.
func TestWorkerFakeStartStreamLost(t *testing.T) {
	t.Parallel()
	e := wtStartSetup(t)
	s1 := e.s
	s1.send(wtOnceDispatch("A", "a1", "t", `"ok"`))
	s1.next("A's Start", wtIsStart("a1"), wtNoResult(t))
	s1.end <- connect.NewError(connect.CodeUnavailable, errors.New("going away"))
	s2 := e.f.session(t)
	s2.send(wtDecision("a1", true, ""))
	s2.send(wtDispatch("B", "t", `"ok"`, nil, time.Now().Add(time.Hour)))
	if got := wtRecv(t, e.b.started, 10*time.Second, "B runs"); got != `B:"ok"` {
		t.Fatalf("started %s, want B", got)
	}
	s2.next("B's result", wtIsResult("B"), wtNoStart(t))
	s2.next("an empty heartbeat", wtIsHeartbeatOfAttempts(nil, nil), wtNoStart(t))
	wtNotStarted(t, e.b)
}

// TestWorkerFakeStartDrainFirst: an at-most-once task dispatched during a
// drain is left unstarted as any other (listed in heartbeats, no Result:
// the close releases it): no Start is sent.
func TestWorkerFakeStartDrainFirst(t *testing.T) {
	t.Parallel()
	d := wtStartDrain(t) // A runs; the drain is under way
	s := d.s
	s.send(wtOnceDispatch("B", "b1", "t", "{}"))
	s.next("a heartbeat listing A and B", wtIsHeartbeatOf("A", "B"), wtNoStart(t))
	s.next("another one", wtIsHeartbeatOf("A", "B"), wtNoStart(t))
	close(d.release)
	if r := s.next("A's result", wtIsResult("A"), wtNoStart(t)).GetResult(); r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Fatalf("A's result = %v, want SUCCESS", r)
	}
	for m := range s.in { // until the worker closes its side
		wtNoStart(t)(m)
	}
	s.end <- nil
	if err := wtRecv(t, d.shut, 10*time.Second, "Shutdown returns"); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if err := d.run.wait(t, 10*time.Second); err != nil {
		t.Fatalf("Run = %v", err)
	}
	if len(d.started) != 0 {
		t.Fatal("B ran during the drain")
	}
}

// TestWorkerFakeStartAskedThenDrain: a drain that begins once the Start is
// sent waits for the decision, and runs the task, authorized, within the
// drain grace, as it would a running handler (not running it would leave
// the server an authorized start with no outcome).
func TestWorkerFakeStartAskedThenDrain(t *testing.T) {
	t.Parallel()
	logs := wtLogWatch{msgs: make(chan string, 256)}
	e := wtStartSetup(t, conveyor.WithDrainGrace(10*time.Second), conveyor.WithLogger(slog.New(logs)))
	s := e.s
	s.send(wtOnceDispatch("A", "a1", "t", `"ok"`))
	s.next("A's Start", wtIsStart("a1"), wtNoResult(t))
	shut := make(chan error, 1)
	go func() { shut <- e.w.Shutdown(context.Background()) }()
	logs.await(t, "worker draining")
	s.send(wtDecision("a1", true, ""))
	r := s.next("A's result", wtIsResult("A"), nil).GetResult()
	if r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Fatalf("A's result = %v, want SUCCESS", r)
	}
	for range s.in { // until the worker closes its side
	}
	s.end <- nil
	if err := wtRecv(t, shut, 10*time.Second, "Shutdown returns"); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
}
