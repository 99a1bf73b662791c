package conveyor_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// The tests in this file drive the worker from a scripted WorkerService:
// the real server never sends Ping, unknown frames, a Cancel for a task it
// did not dispatch, or a dispatch at a chosen moment of a drain, so these
// protocol cases need a hand-written peer.

// wtFake is a scripted WorkerService: each session is handed to the test,
// which sends frames and reads what the worker sends.
type wtFake struct {
	conveyorv1connect.UnimplementedWorkerServiceHandler
	leaseTTL, heartbeat time.Duration
	refuse              error // returned instead of Welcome, when set
	hellos              atomic.Int32
	sessions            chan *wtFakeSession
}

type wtFakeSession struct {
	t     *testing.T
	hello *conveyorv1.Hello
	in    chan *conveyorv1.WorkerMessage // closed when the worker's side ends
	out   chan *conveyorv1.ServerMessage
	end   chan error
}

func (f *wtFake) Session(ctx context.Context, stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]) error {
	m, err := stream.Receive()
	if err != nil {
		return err
	}
	f.hellos.Add(1)
	if f.refuse != nil {
		return f.refuse
	}
	s := &wtFakeSession{hello: m.GetHello(), in: make(chan *conveyorv1.WorkerMessage, 64),
		out: make(chan *conveyorv1.ServerMessage, 16), end: make(chan error, 1)}
	err = stream.Send(&conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Welcome{Welcome: &conveyorv1.Welcome{
		SessionId: "fake", LeaseTtl: durationpb.New(f.leaseTTL), HeartbeatInterval: durationpb.New(f.heartbeat),
		ServerVersion: "fake"}}})
	if err != nil {
		return err
	}
	go func() {
		defer close(s.in)
		for {
			m, err := stream.Receive()
			if err != nil {
				return
			}
			select {
			case s.in <- m:
			case <-ctx.Done():
				return
			}
		}
	}()
	select {
	case f.sessions <- s:
	case <-ctx.Done():
		return nil
	}
	for {
		select {
		case m := <-s.out:
			if err := stream.Send(m); err != nil {
				return err
			}
		case err := <-s.end:
			return err
		case <-ctx.Done():
			return nil
		}
	}
}

// wtStartFake serves f on a loopback port and returns its URL.
func wtStartFake(t *testing.T, f *wtFake) string {
	t.Helper()
	if f.leaseTTL == 0 {
		f.leaseTTL = 10 * time.Second
	}
	if f.heartbeat == 0 {
		f.heartbeat = 50 * time.Millisecond
	}
	f.sessions = make(chan *wtFakeSession, 4)
	return serveStub(t)(conveyorv1connect.NewWorkerServiceHandler(f))
}

func (f *wtFake) session(t *testing.T) *wtFakeSession {
	t.Helper()
	s := wtRecv(t, f.sessions, 10*time.Second, "a worker session")
	s.t = t
	return s
}

func (s *wtFakeSession) send(m *conveyorv1.ServerMessage) {
	s.out <- m
}

// next returns the next frame the worker sends that satisfies match,
// failing if the worker's side ends or nothing matches in time. Frames
// skipped on the way are passed to skipped, when not nil.
func (s *wtFakeSession) next(what string, match func(*conveyorv1.WorkerMessage) bool, skipped func(*conveyorv1.WorkerMessage)) *conveyorv1.WorkerMessage {
	s.t.Helper()
	return s.nextWithin(10*time.Second, what, match, skipped)
}

// nextWithin is next with its own bound on the wait, for frames that take
// long to build (tens of thousands of members, under -race on a loaded
// machine).
func (s *wtFakeSession) nextWithin(wait time.Duration, what string, match func(*conveyorv1.WorkerMessage) bool, skipped func(*conveyorv1.WorkerMessage)) *conveyorv1.WorkerMessage {
	s.t.Helper()
	timeout := time.After(wait)
	for {
		select {
		case m, ok := <-s.in:
			if !ok {
				s.t.Fatalf("the worker closed the stream while the test waited for %s", what)
			}
			if match(m) {
				return m
			}
			if skipped != nil {
				skipped(m)
			}
		case <-timeout:
			s.t.Fatalf("no %s within %s", what, wait)
			return nil
		}
	}
}

func wtIsResult(id string) func(*conveyorv1.WorkerMessage) bool {
	return func(m *conveyorv1.WorkerMessage) bool { return m.GetResult().GetTaskId() == id }
}

// wtIsHeartbeatOf matches a heartbeat listing exactly ids.
func wtIsHeartbeatOf(ids ...string) func(*conveyorv1.WorkerMessage) bool {
	slices.Sort(ids)
	return func(m *conveyorv1.WorkerMessage) bool {
		hb := m.GetHeartbeat()
		if hb == nil {
			return false
		}
		got := slices.Sorted(slices.Values(hb.GetActiveTaskIds()))
		return slices.Equal(got, ids)
	}
}

// wtNoResult fails the test on any Result frame.
func wtNoResult(t *testing.T) func(*conveyorv1.WorkerMessage) {
	return func(m *conveyorv1.WorkerMessage) {
		t.Helper()
		if r := m.GetResult(); r != nil {
			t.Fatalf("unexpected result %v", r)
		}
	}
}

func wtDispatch(id, typ, payload string, opts *conveyorv1.TaskOptions, deadline time.Time) *conveyorv1.ServerMessage {
	return &conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Dispatch{Dispatch: &conveyorv1.Dispatch{
		Task: &conveyorv1.TaskEnvelope{Id: id, Queue: "default", Type: typ, Payload: []byte(payload),
			ContentType: "application/json", Options: opts},
		Deadline: timestamppb.New(deadline),
	}}}
}

func wtCancel(id string) *conveyorv1.ServerMessage {
	return &conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Cancel{Cancel: &conveyorv1.Cancel{TaskId: id}}}
}

// wtBlocker is a handler that reports each start on started (by payload)
// and then, for payload "block", waits for its context and returns the
// cause; any other payload succeeds at once.
type wtBlocker struct {
	started chan string
	causes  chan error
}

func newWTBlocker() *wtBlocker {
	return &wtBlocker{started: make(chan string, 16), causes: make(chan error, 16)}
}

func (b *wtBlocker) ProcessTask(ctx context.Context, d *conveyor.Delivery) error {
	b.started <- d.ID + ":" + string(d.Payload)
	if string(d.Payload) != `"block"` {
		return nil
	}
	<-ctx.Done()
	b.causes <- context.Cause(ctx)
	return context.Cause(ctx)
}

func TestWorkerFakeProtocolTolerance(t *testing.T) {
	t.Parallel()
	f := &wtFake{}
	url := wtStartFake(t, f)
	b := newWTBlocker()
	w := wtNewWorker(t, url, conveyor.WithConcurrency(1), conveyor.WithLabels(map[string]string{"host": "test"}))
	w.Handle("t", b)
	wtRun(t, w)
	s := f.session(t)
	if h := s.hello; h.GetConcurrency() != 1 || h.GetQueues()["default"] != 1 || h.GetSdkVersion() != conveyor.Version ||
		h.GetLabels()["host"] != "test" {
		t.Fatalf("hello = %v", h)
	}

	s.send(&conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Ping{Ping: &conveyorv1.Ping{}}})
	s.send(wtCancel("not-a-task"))
	s.send(&conveyorv1.ServerMessage{}) // an empty (or, to this SDK, unknown) frame
	far := time.Now().Add(time.Hour)
	s.send(wtDispatch("A", "t", `"block"`, nil, far))
	s.send(wtDispatch("B", "t", `"ok"`, nil, far))
	if got := wtRecv(t, b.started, 10*time.Second, "A starts"); got != `A:"block"` {
		t.Fatalf("started %s first", got)
	}
	// B waits for the only slot, and is listed in heartbeats meanwhile.
	s.next("a heartbeat listing A and B", wtIsHeartbeatOf("A", "B"), wtNoResult(t))
	select {
	case got := <-b.started:
		t.Fatalf("%s started beyond the concurrency of 1", got)
	default:
	}

	s.send(wtCancel("A"))
	if c := wtRecv(t, b.causes, 10*time.Second, "A's cancellation"); !errors.Is(c, conveyor.ErrCanceledByServer) {
		t.Fatalf("A's cause = %v, want ErrCanceledByServer", c)
	}
	r := s.next("A's result", wtIsResult("A"), nil).GetResult()
	if r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY || !strings.Contains(r.GetErrorMsg(), "canceled") {
		t.Fatalf("A's result = %v, want RETRY saying canceled", r)
	}
	r = s.next("B's result", wtIsResult("B"), wtNoResult(t)).GetResult()
	if r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Fatalf("B's result = %v, want SUCCESS", r)
	}
	// Nothing more is held: heartbeats go on, empty, and no second result
	// comes for either task.
	s.next("an empty heartbeat", wtIsHeartbeatOf(), wtNoResult(t))
	s.next("another empty heartbeat", wtIsHeartbeatOf(), wtNoResult(t))
}

// TestWorkerFakeLapseThenRedelivery: the server cancels a lapsed attempt
// and redelivers the same task to the same session. The worker must answer
// for the lapsed attempt first (the server drops that Result) and only then
// run the redelivery.
func TestWorkerFakeLapseThenRedelivery(t *testing.T) {
	t.Parallel()
	f := &wtFake{}
	url := wtStartFake(t, f)
	b := newWTBlocker()
	w := wtNewWorker(t, url, conveyor.WithConcurrency(2))
	w.Handle("t", b)
	wtRun(t, w)
	s := f.session(t)
	far := time.Now().Add(time.Hour)
	s.send(wtDispatch("A", "t", `"block"`, nil, far))
	wtRecv(t, b.started, 10*time.Second, "the first attempt starts")
	s.send(wtCancel("A"))
	s.send(wtDispatch("A", "t", `"ok"`, nil, far))
	r1 := s.next("the first attempt's result", wtIsResult("A"), nil).GetResult()
	r2 := s.next("the second attempt's result", wtIsResult("A"), nil).GetResult()
	if r1.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY || r2.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Fatalf("results %v then %v, want RETRY then SUCCESS", r1, r2)
	}
	if got := wtRecv(t, b.started, time.Second, "the second attempt"); got != `A:"ok"` {
		t.Fatalf("second start %s", got)
	}
}

func TestWorkerFakeProgressCoalesced(t *testing.T) {
	t.Parallel()
	f := &wtFake{}
	url := wtStartFake(t, f)
	w := wtNewWorker(t, url, conveyor.WithProgressInterval(100*time.Millisecond))
	var took atomic.Int64 // how long the handler ran
	w.HandleFunc("p", func(_ context.Context, d *conveyor.Delivery) error {
		start := time.Now()
		for i := 1; i <= 100; i++ {
			d.Progress(i, "step")
			time.Sleep(3 * time.Millisecond) // simulated work
		}
		took.Store(int64(time.Since(start)))
		return nil
	})
	wtRun(t, w)
	s := f.session(t)
	s.send(wtDispatch("P", "p", "{}", nil, time.Now().Add(time.Hour)))
	var progress []*conveyorv1.Progress
	s.next("P's result", wtIsResult("P"), func(m *conveyorv1.WorkerMessage) {
		if p := m.GetProgress(); p != nil {
			progress = append(progress, p)
		}
	})
	// One frame per 100 ms interval the handler ran, plus the first and
	// the last: the bound follows how long it really ran on a loaded
	// machine, not the sleeps it asked for.
	most := int(time.Duration(took.Load())/(100*time.Millisecond)) + 2
	if len(progress) < 2 || len(progress) > most {
		t.Fatalf("%d progress frames for 100 updates over %s at one per 100ms, want 2..%d",
			len(progress), time.Duration(took.Load()), most)
	}
	for i := 1; i < len(progress); i++ {
		if progress[i].GetPercent() <= progress[i-1].GetPercent() {
			t.Fatalf("progress went backwards: %v", progress)
		}
	}
	if last := progress[len(progress)-1]; last.GetPercent() != 100 || last.GetMessage() != "step" || last.GetTaskId() != "P" {
		t.Fatalf("last progress before the result = %v, want 100%% step for P", last)
	}
}

// TestWorkerFakeDeadlines: Dispatch.deadline's lease part must not stop a
// task that heartbeats; the task's own timeout and deadline must.
func TestWorkerFakeDeadlines(t *testing.T) {
	t.Parallel()
	f := &wtFake{leaseTTL: 300 * time.Millisecond, heartbeat: 100 * time.Millisecond}
	url := wtStartFake(t, f)
	w := wtNewWorker(t, url, conveyor.WithConcurrency(3))
	w.HandleFunc("sleep", func(ctx context.Context, d *conveyor.Delivery) error {
		if !d.Deadline.IsZero() {
			return conveyor.SkipRetry(errors.New("a task without timeout or deadline got a handler deadline"))
		}
		select {
		case <-time.After(900 * time.Millisecond): // three lease TTLs of work
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	})
	w.HandleFunc("wait", func(ctx context.Context, d *conveyor.Delivery) error {
		<-ctx.Done()
		return ctx.Err()
	})
	wtRun(t, w)
	s := f.session(t)
	now := time.Now()
	s.send(wtDispatch("L", "sleep", "{}", nil, now.Add(f.leaseTTL)))
	s.send(wtDispatch("T", "wait", "{}", &conveyorv1.TaskOptions{Timeout: durationpb.New(150 * time.Millisecond)}, now.Add(150*time.Millisecond)))
	s.send(wtDispatch("D", "wait", "{}", &conveyorv1.TaskOptions{Deadline: timestamppb.New(now.Add(150 * time.Millisecond))}, now.Add(150*time.Millisecond)))
	results := map[string]*conveyorv1.Result{}
	for len(results) < 3 {
		m := s.next("a result", func(m *conveyorv1.WorkerMessage) bool { return m.GetResult() != nil }, nil)
		results[m.GetResult().GetTaskId()] = m.GetResult()
	}
	if r := results["L"]; r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Errorf("the long task's result = %v, want SUCCESS", r)
	}
	for _, id := range []string{"T", "D"} {
		if r := results[id]; r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY || !strings.Contains(r.GetErrorMsg(), "deadline exceeded") {
			t.Errorf("%s's result = %v, want RETRY for the deadline", id, r)
		}
	}
}

// wtLogWatch is a slog handler that reports each message on a channel.
type wtLogWatch struct{ msgs chan string }

func (h wtLogWatch) Enabled(context.Context, slog.Level) bool { return true }
func (h wtLogWatch) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.msgs <- r.Message:
	default:
	}
	return nil
}
func (h wtLogWatch) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h wtLogWatch) WithGroup(string) slog.Handler      { return h }

func (h wtLogWatch) await(t *testing.T, msg string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case m := <-h.msgs:
			if m == msg {
				return
			}
		case <-timeout:
			t.Fatalf("no log %q within 10s", msg)
		}
	}
}

// TestWorkerFakeDrainParksLateDispatch: a dispatch that arrives during a
// drain is listed in heartbeats but never started, the running task
// finishes with its real outcome, and the worker then closes the stream
// without answering for the parked one (the server releases it).
func TestWorkerFakeDrainParksLateDispatch(t *testing.T) {
	t.Parallel()
	d := wtStartDrain(t)
	s, release := d.s, d.release
	s.send(wtDispatch("B", "t", "{}", nil, time.Now().Add(time.Hour)))
	s.next("a heartbeat listing A and B", wtIsHeartbeatOf("A", "B"), wtNoResult(t))
	s.next("another heartbeat listing A and B", wtIsHeartbeatOf("A", "B"), wtNoResult(t))
	close(release)
	res := s.next("A's result", wtIsResult("A"), wtNoResult(t)).GetResult()
	if res.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS || string(res.GetResult()) != "done" {
		t.Fatalf("A's result = %v, want SUCCESS with its result", res)
	}
	d.finish(t) // with no Result for B
}

// wtDrain is a worker of concurrency 2 draining: its handler (of type
// "t") runs until release closes, then succeeds with result "done"; task
// A runs, and a Shutdown is under way.
type wtDrain struct {
	s       *wtFakeSession
	run     *wtRunning
	release chan struct{}
	started chan string
	shut    chan error
}

func wtStartDrain(t *testing.T) *wtDrain {
	t.Helper()
	f := &wtFake{}
	url := wtStartFake(t, f)
	logs := wtLogWatch{msgs: make(chan string, 256)}
	d := &wtDrain{release: make(chan struct{}), started: make(chan string, 4), shut: make(chan error, 1)}
	w := wtNewWorker(t, url, conveyor.WithConcurrency(2), conveyor.WithDrainGrace(10*time.Second), conveyor.WithLogger(slog.New(logs)))
	w.HandleFunc("t", func(ctx context.Context, del *conveyor.Delivery) error {
		d.started <- del.ID
		select {
		case <-d.release:
			del.SetResult([]byte("done"))
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	d.run = wtRun(t, w)
	d.s = f.session(t)
	d.s.send(wtDispatch("A", "t", "{}", nil, time.Now().Add(time.Hour)))
	wtRecv(t, d.started, 10*time.Second, "A starts")
	go func() { d.shut <- w.Shutdown(context.Background()) }()
	logs.await(t, "worker draining")
	return d
}

// finish checks the drain's end: the worker closes its side with no more
// Results, Shutdown and Run return cleanly, and no task started meanwhile.
func (d *wtDrain) finish(t *testing.T) {
	t.Helper()
	for m := range d.s.in {
		if r := m.GetResult(); r != nil {
			t.Fatalf("result after the drain: %v", r)
		}
	}
	d.s.end <- nil
	if err := wtRecv(t, d.shut, 10*time.Second, "Shutdown returns"); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if err := d.run.wait(t, time.Second); err != nil {
		t.Fatalf("Run = %v", err)
	}
	select {
	case id := <-d.started:
		t.Fatalf("%s started during the drain", id)
	default:
	}
}

// TestWorkerFakeSessionLoss: when a session breaks, its running handlers
// are canceled with ErrSessionLost, the worker reconnects, and their
// results are never sent on the new session.
func TestWorkerFakeSessionLoss(t *testing.T) {
	t.Parallel()
	f := &wtFake{}
	url := wtStartFake(t, f)
	b := newWTBlocker()
	w := wtNewWorker(t, url, conveyor.WithConcurrency(2))
	w.Handle("t", b)
	wtRun(t, w)
	s1 := f.session(t)
	s1.send(wtDispatch("A", "t", `"block"`, nil, time.Now().Add(time.Hour)))
	wtRecv(t, b.started, 10*time.Second, "A starts")
	s1.end <- connect.NewError(connect.CodeUnavailable, errors.New("going away"))
	if c := wtRecv(t, b.causes, 10*time.Second, "A's cancellation"); !errors.Is(c, conveyor.ErrSessionLost) {
		t.Fatalf("A's cause = %v, want ErrSessionLost", c)
	}
	s2 := f.session(t)
	s2.send(wtDispatch("B", "t", `"ok"`, nil, time.Now().Add(time.Hour)))
	s2.next("B's result", wtIsResult("B"), wtNoResult(t))
	s2.next("an empty heartbeat", wtIsHeartbeatOf(), wtNoResult(t))
}

func TestWorkerFakeFatalRefusal(t *testing.T) {
	t.Parallel()
	f := &wtFake{refuse: connect.NewError(connect.CodePermissionDenied, errors.New("not for you"))}
	url := wtStartFake(t, f)
	w := wtNewWorker(t, url)
	w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error { return nil })
	err := wtRun(t, w).wait(t, 10*time.Second)
	if connect.CodeOf(err) != connect.CodePermissionDenied {
		t.Fatalf("Run = %v, want permission_denied", err)
	}
	if n := f.hellos.Load(); n != 1 {
		t.Fatalf("%d sessions attempted, want 1 (no reconnect on a fatal error)", n)
	}
}

func TestWorkerFakeTransientRefusalReconnects(t *testing.T) {
	t.Parallel()
	f := &wtFake{refuse: connect.NewError(connect.CodeUnavailable, errors.New("busy"))}
	url := wtStartFake(t, f)
	w := wtNewWorker(t, url)
	w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error { return nil })
	r := wtRun(t, w)
	servertest.Eventually(t, 10*time.Second, "three session attempts", func() bool { return f.hellos.Load() >= 3 })
	if err := w.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := r.wait(t, 5*time.Second); err != nil {
		t.Fatalf("Run = %v, want nil after a stop", err)
	}
}

func TestWorkerFakeBatch(t *testing.T) {
	t.Parallel()
	f := &wtFake{}
	url := wtStartFake(t, f)
	release := make(chan struct{})
	batches := make(chan *conveyor.DeliveryBatch, 4)
	w := wtNewWorker(t, url, conveyor.WithConcurrency(1))
	w.HandleBatch("agg", conveyor.BatchHandlerFunc(func(ctx context.Context, b *conveyor.DeliveryBatch) error {
		batches <- b
		if b.Group != "" {
			<-release
		}
		for _, d := range b.Tasks {
			d.SetResult([]byte("r:" + d.ID))
			if string(d.Payload) == `"bad"` {
				b.Fail(d, conveyor.SkipRetry(errors.New("bad member")))
			}
		}
		return nil
	}))
	w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error { return nil })
	wtRun(t, w)
	s := f.session(t)
	if bt := s.hello.GetBatchTypes(); !slices.Equal(bt, []string{"agg"}) {
		t.Fatalf("hello.batch_types = %v, want [agg]", bt)
	}
	member := func(id, payload string) *conveyorv1.TaskEnvelope {
		return &conveyorv1.TaskEnvelope{Id: id, Queue: "default", Type: "agg", Payload: []byte(payload), ContentType: "application/json"}
	}
	s.send(&conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_BatchDispatch{BatchDispatch: &conveyorv1.BatchDispatch{
		Group: "g", Deadline: timestamppb.New(time.Now().Add(time.Hour)),
		Tasks: []*conveyorv1.TaskEnvelope{member("X1", "1"), member("X2", `"bad"`), member("X3", "3")},
	}}})
	if b := wtRecv(t, batches, 10*time.Second, "the batch"); b.Group != "g" || len(b.Tasks) != 3 {
		t.Fatalf("batch %q with %d members, want g with 3", b.Group, len(b.Tasks))
	}
	// The batch holds the only slot; a plain task waits, and every member
	// and the waiting task are heartbeated.
	s.send(wtDispatch("T", "t", "{}", nil, time.Now().Add(time.Hour)))
	s.next("a heartbeat listing the members and T", wtIsHeartbeatOf("X1", "X2", "X3", "T"), wtNoResult(t))
	close(release)
	br := s.next("the batch result", func(m *conveyorv1.WorkerMessage) bool { return m.GetBatchResult() != nil }, wtNoResult(t)).GetBatchResult()
	got := map[string]*conveyorv1.Result{}
	for _, r := range br.GetResults() {
		got[r.GetTaskId()] = r
	}
	for _, id := range []string{"X1", "X3"} {
		if r := got[id]; r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS || string(r.GetResult()) != "r:"+id {
			t.Errorf("%s: %v, want SUCCESS with its result", id, r)
		}
	}
	if r := got["X2"]; r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY || r.GetErrorMsg() != "bad member" {
		t.Errorf("X2: %v, want SKIP_RETRY", r)
	}
	s.next("T's result", wtIsResult("T"), nil)

	// A member redelivered alone is a batch of one, answered with a Result.
	s.send(wtDispatch("X2", "agg", "2", nil, time.Now().Add(time.Hour)))
	if b := wtRecv(t, batches, 10*time.Second, "the batch of one"); b.Group != "" || len(b.Tasks) != 1 || b.Tasks[0].ID != "X2" {
		t.Fatalf("batch of one = %q %d", b.Group, len(b.Tasks))
	}
	if r := s.next("X2's result", wtIsResult("X2"), nil).GetResult(); r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Fatalf("X2 alone: %v", r)
	}
}
