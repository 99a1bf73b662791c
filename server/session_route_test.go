package server_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// frameWait bounds how long these tests wait for a frame they expect.
const frameWait = 10 * time.Second

func helloFor(types ...string) *conveyorv1.Hello {
	return &conveyorv1.Hello{Queues: map[string]int32{"default": 1}, Concurrency: 4, SdkVersion: "test", Types: types}
}

// nextDispatch returns the next Dispatch, skipping other frames.
func (w *rawWorker) nextDispatch() *conveyorv1.Dispatch {
	w.t.Helper()
	for {
		if d := w.next(frameWait).GetDispatch(); d != nil {
			return d
		}
	}
}

// nextDecision returns the next StartDecision, skipping other frames.
func (w *rawWorker) nextDecision() *conveyorv1.StartDecision {
	w.t.Helper()
	for {
		if d := w.next(frameWait).GetStartDecision(); d != nil {
			return d
		}
	}
}

func (w *rawWorker) succeed(d *conveyorv1.Dispatch) {
	w.t.Helper()
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: d.GetTask().GetId(), AttemptId: d.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}}})
}

func (w *rawWorker) askStart(attemptID string) {
	w.t.Helper()
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Start{Start: &conveyorv1.Start{AttemptId: attemptID}}})
}

func (w *rawWorker) close() {
	w.t.Helper()
	if err := w.stream.CloseRequest(); err != nil {
		w.t.Fatal(err)
	}
	if err := <-w.end; !errors.Is(err, io.EOF) {
		w.t.Fatalf("stream end after close: %v", err)
	}
}

func taskState(t *testing.T, s *servertest.Server, id string) *conveyorv1.TaskInfo {
	t.Helper()
	res, err := taskClient(t, s, servertest.GRPC).GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
	if err != nil {
		t.Fatal(err)
	}
	return res.Msg
}

// TestRoutingByType: each typed session is sent only its types; a type no
// session declares waits PENDING (and is listed as unserved) until an
// untyped session takes it.
func TestRoutingByType(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	orphan := enqueue(t, tasks, &conveyorv1.EnqueueRequest{Type: "c"})
	wa, _, err := openSession(t, s, servertest.GRPC, helloFor("a"))
	if err != nil {
		t.Fatal(err)
	}
	wb, _, err := openSession(t, s, servertest.Connect, helloFor("b", "x"))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		enqueue(t, tasks, &conveyorv1.EnqueueRequest{Type: "a"})
		enqueue(t, tasks, &conveyorv1.EnqueueRequest{Type: "b"})
	}
	for range 3 {
		if d := wa.nextDispatch(); d.GetTask().GetType() != "a" {
			t.Fatalf("the session of type a was sent a %q", d.GetTask().GetType())
		} else {
			wa.succeed(d)
		}
		if d := wb.nextDispatch(); d.GetTask().GetType() != "b" {
			t.Fatalf("the session of types b, x was sent a %q", d.GetTask().GetType())
		} else {
			wb.succeed(d)
		}
	}
	if st := taskState(t, s, orphan).GetState(); st != conveyorv1.TaskState_TASK_STATE_PENDING {
		t.Fatalf("the task of type c is %v, want PENDING", st)
	}
	servertest.Eventually(t, frameWait, "type c listed as unserved", func() bool {
		u := queueCounts(t, s, "default").GetUnservedTypes()
		return len(u) == 1 && u[0] == "c"
	})
	if v := value(scrape(t, s), "conveyor_queue_unserved_types", "queue=default"); v != 1 {
		t.Errorf("conveyor_queue_unserved_types{default} = %v, want 1", v)
	}
	wany, _, err := openSession(t, s, servertest.GRPC, helloFor())
	if err != nil {
		t.Fatal(err)
	}
	if d := wany.nextDispatch(); d.GetTask().GetId() != orphan {
		t.Fatalf("the untyped session was sent %s, want the waiting task of type c", d.GetTask().GetId())
	}
	if u := queueCounts(t, s, "default").GetUnservedTypes(); len(u) != 0 {
		t.Fatalf("unserved types %v once the task was taken", u)
	}
}

// TestHelloTypesBounds: a Hello's types are bounded like its batch types.
func TestHelloTypesBounds(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	for name, h := range map[string]*conveyorv1.Hello{
		"empty type":   helloFor(""),
		"long type":    helloFor(strings.Repeat("t", 1025)),
		"long release": {Queues: map[string]int32{"default": 1}, Concurrency: 1, ReleaseId: strings.Repeat("r", 2000)},
	} {
		_, _, err := openSession(t, s, servertest.GRPC, h)
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%s: %v, want invalid_argument", name, err)
		}
	}
}

func enqueueOnce(t *testing.T, s *servertest.Server) string {
	t.Helper()
	return enqueue(t, taskClient(t, s, servertest.GRPC), &conveyorv1.EnqueueRequest{Type: "pay",
		Options: &conveyorv1.TaskOptions{AtMostOnce: true}})
}

func authorizingHello() *conveyorv1.Hello {
	h := helloFor()
	h.StartAuthorization = true
	return h
}

// TestAtMostOnceOnlyToAuthorizingSessions: a session that does not ask
// before it starts a task is never sent an at-most-once one; one that
// does gets it with start_required.
func TestAtMostOnceOnlyToAuthorizingSessions(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	once := enqueueOnce(t, s)
	plain := enqueue(t, taskClient(t, s, servertest.GRPC), &conveyorv1.EnqueueRequest{Type: "pay"})
	w, _, err := openSession(t, s, servertest.GRPC, helloFor())
	if err != nil {
		t.Fatal(err)
	}
	if d := w.nextDispatch(); d.GetTask().GetId() != plain || d.GetStartRequired() {
		t.Fatalf("the plain session was sent %s (start_required %v), want %s", d.GetTask().GetId(), d.GetStartRequired(), plain)
	}
	if st := taskState(t, s, once).GetState(); st != conveyorv1.TaskState_TASK_STATE_PENDING {
		t.Fatalf("the at-most-once task is %v, want PENDING", st)
	}
	wa, _, err := openSession(t, s, servertest.GRPC, authorizingHello())
	if err != nil {
		t.Fatal(err)
	}
	d := wa.nextDispatch()
	if d.GetTask().GetId() != once || !d.GetStartRequired() || !d.GetTask().GetOptions().GetAtMostOnce() {
		t.Fatalf("the authorizing session was sent %v, want %s with start_required", d, once)
	}
	wa.askStart(d.GetAttemptId())
	if dec := wa.nextDecision(); !dec.GetAuthorized() || dec.GetAttemptId() != d.GetAttemptId() {
		t.Fatalf("decision %v, want authorized for %s", dec, d.GetAttemptId())
	}
	wa.succeed(d)
	servertest.Eventually(t, frameWait, "the at-most-once task completed", func() bool {
		return taskState(t, s, once).GetState() == conveyorv1.TaskState_TASK_STATE_COMPLETED
	})
}

// TestAtMostOnceClosedStream: a stream that closes after the start was
// authorized leaves the task ARCHIVED with "outcome unknown", never sent
// again; one that closes before is released and sent again.
func TestAtMostOnceClosedStream(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	id := enqueueOnce(t, s)

	w, _, err := openSession(t, s, servertest.GRPC, authorizingHello())
	if err != nil {
		t.Fatal(err)
	}
	first := w.nextDispatch()
	w.close() // before any Start: released, no penalty
	servertest.Eventually(t, frameWait, "released", func() bool {
		return taskState(t, s, id).GetState() == conveyorv1.TaskState_TASK_STATE_PENDING
	})

	w, _, err = openSession(t, s, servertest.Connect, authorizingHello())
	if err != nil {
		t.Fatal(err)
	}
	d := w.nextDispatch()
	if d.GetTask().GetId() != id || d.GetAttemptId() == first.GetAttemptId() || d.GetTask().GetRetried() != 0 {
		t.Fatalf("redelivery %v, want %s under a new attempt, retried 0", d, id)
	}
	w.askStart(first.GetAttemptId()) // the old attempt: not this session's
	if dec := w.nextDecision(); dec.GetAuthorized() || dec.GetReason() == "" {
		t.Fatalf("a Start of the old attempt: %v, want refused with a reason", dec)
	}
	w.askStart(d.GetAttemptId())
	if dec := w.nextDecision(); !dec.GetAuthorized() {
		t.Fatalf("a Start of the current attempt: %v", dec)
	}
	w.close()
	servertest.Eventually(t, frameWait, "archived, outcome unknown", func() bool {
		info := taskState(t, s, id)
		return info.GetState() == conveyorv1.TaskState_TASK_STATE_ARCHIVED && strings.HasPrefix(info.GetLastError(), "outcome unknown:")
	})

	// RELEASED after the start is no proof it did not run either.
	id = enqueueOnce(t, s)
	w, _, err = openSession(t, s, servertest.GRPC, authorizingHello())
	if err != nil {
		t.Fatal(err)
	}
	d = w.nextDispatch()
	w.askStart(d.GetAttemptId())
	w.nextDecision()
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: id, AttemptId: d.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED}}})
	servertest.Eventually(t, frameWait, "archived after RELEASED", func() bool {
		info := taskState(t, s, id)
		return info.GetState() == conveyorv1.TaskState_TASK_STATE_ARCHIVED && strings.HasPrefix(info.GetLastError(), "outcome unknown:")
	})
}

// TestAtMostOnceLapse: an authorized attempt whose lease lapses is
// archived, and its late Start is refused; an unknown attempt id is
// refused with a reason.
func TestAtMostOnceLapse(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{LeaseTTL: time.Second})
	w, _, err := openSession(t, s, servertest.GRPC, authorizingHello())
	if err != nil {
		t.Fatal(err)
	}
	w.askStart("no-such-attempt")
	if dec := w.nextDecision(); dec.GetAuthorized() || !strings.Contains(dec.GetReason(), "unknown attempt") {
		t.Fatalf("a Start of an unknown attempt: %v", dec)
	}
	id := enqueueOnce(t, s)
	d := w.nextDispatch()
	w.askStart(d.GetAttemptId())
	if dec := w.nextDecision(); !dec.GetAuthorized() {
		t.Fatalf("decision %v", dec)
	}
	// No heartbeat: the lease lapses.
	servertest.Eventually(t, frameWait, "archived after the lapse", func() bool {
		info := taskState(t, s, id)
		return info.GetState() == conveyorv1.TaskState_TASK_STATE_ARCHIVED && strings.HasPrefix(info.GetLastError(), "outcome unknown:")
	})
	w.askStart(d.GetAttemptId())
	if dec := w.nextDecision(); dec.GetAuthorized() {
		t.Fatalf("a Start after the lapse was authorized: %v", dec)
	}
}

// TestAtMostOnceWithGroupRefused: at_most_once and group do not mix.
func TestAtMostOnceWithGroupRefused(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	_, err := taskClient(t, s, servertest.GRPC).Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{
		Type: "pay", Options: &conveyorv1.TaskOptions{AtMostOnce: true, Group: "g"}}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "at_most_once") {
		t.Fatalf("at_most_once with a group: %v, want invalid_argument naming at_most_once", err)
	}
}

// TestRoutingGroupsByType: a typed session with a batch type is sent the
// fired groups of that type, and single tasks of its types and its batch
// type, never another type's.
func TestRoutingGroupsByType(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{GroupPolicy: brokerGroupPolicy(2, time.Hour, time.Hour)})
	tasks := taskClient(t, s, servertest.GRPC)
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 4,
		Types: []string{"a"}, BatchTypes: []string{"sum"}})
	if err != nil {
		t.Fatal(err)
	}
	other := enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "q", Type: "b"})
	enqueueGrouped(t, tasks, 2)
	if bd := w.next(frameWait).GetBatchDispatch(); len(bd.GetTasks()) != 2 || bd.GetTasks()[0].GetType() != "sum" {
		t.Fatalf("got %v, want the fired group of sum", bd)
	}
	single := enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "q", Type: "sum"})
	if d := w.nextDispatch(); d.GetTask().GetId() != single {
		t.Fatalf("got %s (%s), want the single sum task", d.GetTask().GetId(), d.GetTask().GetType())
	}
	if st := taskState(t, s, other).GetState(); st != conveyorv1.TaskState_TASK_STATE_PENDING {
		t.Fatalf("the task of type b is %v, want PENDING", st)
	}
}
