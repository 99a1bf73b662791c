package server_test

import (
	"context"
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

// TestConcurrencyIsBounded: a Hello declaring more than the server's
// MaxSessionConcurrency is refused, naming the limit.
func TestConcurrencyIsBounded(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{MaxSessionConcurrency: 8})
	_, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"a": 1}, Concurrency: 1 << 30})
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "at most 8") {
		t.Fatalf("concurrency 2^30: %v, want invalid_argument naming the limit 8", err)
	}
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"a": 1}, Concurrency: 8})
	if err != nil {
		t.Fatalf("concurrency at the limit: %v", err)
	}
	_ = w.stream.CloseRequest()
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
