package server_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func adminClient(t testing.TB, s *servertest.Server) conveyorv1connect.AdminServiceClient {
	t.Helper()
	return conveyorv1connect.NewAdminServiceClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC())
}

func queueCounts(t testing.TB, s *servertest.Server, name string) *conveyorv1.QueueInfo {
	t.Helper()
	res, err := adminClient(t, s).ListQueues(context.Background(), connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range res.Msg.GetQueues() {
		if q.GetName() == name {
			return q
		}
	}
	return &conveyorv1.QueueInfo{}
}

// TestOversizedResultFailsTheTaskNotTheStream: a Result over 1 MiB is a
// failed attempt with a last_error naming the limit; the session lives on
// and keeps getting work.
func TestOversizedResultFailsTheTaskNotTheStream(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	for range 2 {
		if _, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t"})); err != nil {
			t.Fatal(err)
		}
	}
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"default": 1}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := w.next(10 * time.Second).GetDispatch()
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: d.GetTask().GetId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS, Result: make([]byte, server.MaxResultBytes+1)}}})
	next := w.next(10 * time.Second).GetDispatch()
	if next == nil || next.GetTask().GetId() == d.GetTask().GetId() {
		t.Fatalf("after the oversized result got %v, want the other task", next)
	}
	// The slot is given back as the Result arrives; the attempt's end is
	// applied just after, and may be behind the next dispatch.
	var got *connect.Response[conveyorv1.TaskInfo]
	servertest.Eventually(t, 10*time.Second, "the oversized result applied", func() bool {
		got, err = tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: d.GetTask().GetId()}))
		return err == nil && got.Msg.GetState() != conveyorv1.TaskState_TASK_STATE_ACTIVE
	})
	if got.Msg.GetState() != conveyorv1.TaskState_TASK_STATE_RETRY || got.Msg.GetRetried() != 1 ||
		!strings.Contains(got.Msg.GetLastError(), "limit is 1048576") {
		t.Fatalf("task after an oversized result: %v retried %d %q, want RETRY, 1, naming the limit",
			got.Msg.GetState(), got.Msg.GetRetried(), got.Msg.GetLastError())
	}
}

// TestLongMessagesAreTruncated: error messages and progress messages over
// their bounds are stored truncated, and the stream carries on.
func TestLongMessagesAreTruncated(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	res, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t"}))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.GetTask().GetId()
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"default": 1}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	w.next(10 * time.Second).GetDispatch()
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Progress{Progress: &conveyorv1.Progress{
		TaskId: id, Percent: 10, Message: strings.Repeat("é", server.MaxProgressMessageBytes)}}})
	servertest.Eventually(t, 10*time.Second, "progress stored", func() bool {
		got, err := tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
		m := got.Msg.GetProgressMessage()
		return err == nil && len(m) <= server.MaxProgressMessageBytes && strings.HasSuffix(m, "[truncated]") && strings.HasPrefix(m, "é")
	})
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: id, Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY, ErrorMsg: strings.Repeat("x", 1<<20)}}})
	servertest.Eventually(t, 10*time.Second, "archived with a truncated error", func() bool {
		got, err := tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
		m := got.Msg.GetLastError()
		return err == nil && got.Msg.GetState() == conveyorv1.TaskState_TASK_STATE_ARCHIVED &&
			len(m) <= server.MaxErrorMessageBytes && strings.HasSuffix(m, "[truncated]")
	})
}

// TestConcurrencyAboveTheLimitIsThrottled: a Hello declaring more than the
// server's MaxSessionConcurrency is admitted (the protocol bounds
// concurrency only from below) and sent at most the limit, which the log
// says with both numbers; ListWorkers shows what the worker declared, and
// a Credit is still checked against it.
func TestConcurrencyAboveTheLimitIsThrottled(t *testing.T) {
	t.Parallel()
	const limit, declared = 8, 1_000_000
	throttled := make(chan slog.Record, 1)
	s := servertest.Start(t, server.Config{MaxSessionConcurrency: limit,
		Logger: slog.New(onRecord{"worker session throttled: it is sent at most max_session_concurrency tasks at once, fewer than it declared": throttled})})
	tasks := taskClient(t, s, servertest.GRPC)
	for range 20 {
		if _, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t"})); err != nil {
			t.Fatal(err)
		}
	}
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"default": 1}, Concurrency: declared})
	if err != nil {
		t.Fatalf("concurrency %d against a limit of %d: %v, want the session admitted", declared, limit, err)
	}
	select {
	case r := <-throttled:
		if got := recordAttrs(r); got["concurrency"] != "1000000" || got["max_session_concurrency"] != "8" {
			t.Errorf("throttle log attributes %v, want concurrency=1000000 max_session_concurrency=8", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no log line about the throttled session")
	}
	var got []*conveyorv1.Dispatch
	for range limit {
		got = append(got, w.next(10*time.Second).GetDispatch())
	}
	// One Lease sent them, sized by the free slots: had it been sized by
	// the declared concurrency, all 20 tasks would be active already.
	if a := queueCounts(t, s, "default").GetActive(); a != limit {
		t.Fatalf("%d tasks active on the session, want exactly %d", a, limit)
	}
	workers, err := adminClient(t, s).ListWorkers(context.Background(), connect.NewRequest(&conveyorv1.ListWorkersRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if ws := workers.Msg.GetWorkers(); len(ws) != 1 || ws[0].GetConcurrency() != declared || ws[0].GetInFlight() != limit {
		t.Fatalf("ListWorkers: %v, want one worker declaring %d with %d in flight", ws, declared, limit)
	}
	// A Credit above the limit but within the declared concurrency is
	// valid (protocol §5.5), and adds nothing.
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Credit{Credit: &conveyorv1.Credit{N: 1000}}})
	if n := len(w.frames); n != 0 {
		t.Fatalf("%d more frames before any Result, want none", n)
	}
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: got[0].GetTask().GetId(), AttemptId: got[0].GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}}})
	if d := w.next(10 * time.Second).GetDispatch(); d == nil {
		t.Fatal("the freed slot brought no Dispatch")
	}
	servertest.Eventually(t, 10*time.Second, "one completed", func() bool { return queueCounts(t, s, "default").GetCompleted() == 1 })
	if q := queueCounts(t, s, "default"); q.GetActive() != limit || q.GetPending() != 20-limit-1 {
		t.Fatalf("after one Result: %d active, %d pending; want %d and %d", q.GetActive(), q.GetPending(), limit, 20-limit-1)
	}
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Credit{Credit: &conveyorv1.Credit{N: declared + 1}}})
	var end error
	select {
	case end = <-w.end:
	case <-time.After(10 * time.Second):
		t.Fatal("a Credit above the declared concurrency did not end the stream")
	}
	if err := end; connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "1..1000000") {
		t.Fatalf("credit above the declared concurrency: %v, want invalid_argument naming 1..1000000", err)
	}
}

// onRecord hands the records of the named messages to their channels,
// dropping them when a channel is full.
type onRecord map[string]chan slog.Record

func (h onRecord) Enabled(context.Context, slog.Level) bool { return true }
func (h onRecord) Handle(_ context.Context, r slog.Record) error {
	if ch := h[r.Message]; ch != nil {
		select {
		case ch <- r.Clone():
		default:
		}
	}
	return nil
}
func (h onRecord) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h onRecord) WithGroup(string) slog.Handler      { return h }

// recordAttrs is a record's own attributes, as strings.
func recordAttrs(r slog.Record) map[string]string {
	out := map[string]string{}
	r.Attrs(func(a slog.Attr) bool {
		out[a.Key] = a.Value.String()
		return true
	})
	return out
}

// TestSessionBytesAreBounded: a session with a huge concurrency that
// never answers is sent tasks only up to MaxSessionBytes of payload.
func TestSessionBytesAreBounded(t *testing.T) {
	t.Parallel()
	const perTask = 1 << 20
	s := servertest.Start(t, server.Config{MaxSessionBytes: 3*perTask + 3*(64<<10+512)})
	tasks := taskClient(t, s, servertest.GRPC)
	for range 10 {
		if _, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "big", Payload: make([]byte, perTask)})); err != nil {
			t.Fatal(err)
		}
	}
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"default": 1}, Concurrency: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var got []*conveyorv1.Dispatch
	for len(got) < 2 {
		got = append(got, w.next(10*time.Second).GetDispatch())
	}
	// The Lease that sent them was sized by the byte budget: at most 2
	// worst-case envelopes fit in what is left after the first.
	servertest.Eventually(t, 10*time.Second, "dispatch settled", func() bool { return queueCounts(t, s, "default").GetActive() >= 2 })
	if a := queueCounts(t, s, "default").GetActive(); a > 3 {
		t.Fatalf("%d tasks of 1 MiB active on one session, want at most 3 under the byte bound", a)
	}
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: got[0].GetTask().GetId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}}})
	servertest.Eventually(t, 10*time.Second, "one completed", func() bool { return queueCounts(t, s, "default").GetCompleted() == 1 })
	if a := queueCounts(t, s, "default").GetActive(); a > 3 {
		t.Fatalf("%d tasks active after one answer, want at most 3", a)
	}
}
