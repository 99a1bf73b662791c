package server_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// lapseBundle is a server with a one-second lease, one task and one raw
// worker of concurrency 1 that never heartbeats, so every lease lapses.
type lapseBundle struct {
	s     *servertest.Server
	tasks interface {
		GetTask(context.Context, *connect.Request[conveyorv1.GetTaskRequest]) (*connect.Response[conveyorv1.TaskInfo], error)
	}
	w  *rawWorker
	id string
}

func setupLapse(t *testing.T, cfg server.Config, extra ...string) *lapseBundle {
	t.Helper()
	cfg.LeaseTTL = time.Second
	s := servertest.Start(t, cfg)
	tasks := taskClient(t, s, servertest.GRPC)
	res, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t"}))
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range extra {
		if _, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Type: typ})); err != nil {
			t.Fatal(err)
		}
	}
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"default": 1}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	return &lapseBundle{s: s, tasks: tasks, w: w, id: res.Msg.GetTask().GetId()}
}

func (b *lapseBundle) state(t *testing.T, id string) *conveyorv1.TaskInfo {
	t.Helper()
	got, err := b.tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
	if err != nil {
		t.Fatal(err)
	}
	return got.Msg
}

func (b *lapseBundle) dispatch(t *testing.T, retried int32) *conveyorv1.Dispatch {
	t.Helper()
	d := b.w.next(20 * time.Second).GetDispatch()
	if d.GetTask().GetId() != b.id || d.GetTask().GetRetried() != retried {
		t.Fatalf("got dispatch %v, want task %s with retried %d", d, b.id, retried)
	}
	if d.GetAttemptId() == "" || d.GetAttemptId() != d.GetTask().GetAttemptId() {
		t.Fatalf("dispatch attempt ids %q / %q, want one non-empty id", d.GetAttemptId(), d.GetTask().GetAttemptId())
	}
	return d
}

func (b *lapseBundle) cancel(t *testing.T) {
	t.Helper()
	if c := b.w.next(20 * time.Second).GetCancel(); c.GetTaskId() != b.id {
		t.Fatalf("want a Cancel for %s, got %v", b.id, c)
	}
}

func (b *lapseBundle) answer(outcome conveyorv1.TaskOutcome, attemptID string) {
	b.w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: b.id, Outcome: outcome, AttemptId: attemptID, ErrorMsg: "from " + outcome.String()}}})
}

func (b *lapseBundle) waitCompleted(t *testing.T, retried int32) {
	t.Helper()
	servertest.Eventually(t, 10*time.Second, "completed by the live attempt", func() bool {
		got := b.state(t, b.id)
		return got.GetState() == conveyorv1.TaskState_TASK_STATE_COMPLETED && got.GetRetried() == retried
	})
}

// TestLateResultAfterLongStallIsDropped: a worker that ignores the Cancel
// for longer than twice the lease TTL and then answers (without attempt
// ids) must not have that answer applied to the task's next delivery on
// the same session.
func TestLateResultAfterLongStallIsDropped(t *testing.T) {
	t.Parallel()
	b := setupLapse(t, server.Config{ReclaimWindow: 2500 * time.Millisecond})
	b.dispatch(t, 0)
	b.cancel(t)
	b.dispatch(t, 1) // after the reclaim window: more than 2x the TTL later
	b.answer(conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY, "")
	servertest.Eventually(t, 10*time.Second, "the late result counted", func() bool { return b.s.Stats().LateResults == 1 })
	if got := b.state(t, b.id); got.GetState() != conveyorv1.TaskState_TASK_STATE_ACTIVE {
		t.Fatalf("after the late result the task is %v (%q), want the redelivery still ACTIVE", got.GetState(), got.GetLastError())
	}
	b.answer(conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS, "")
	b.waitCompleted(t, 1)
}

// TestTwoLapsesOwesTwoAnswers: a task that lapses twice on one session
// before either attempt answers is owed two answers; only the third
// Result applies.
func TestTwoLapsesOwesTwoAnswers(t *testing.T) {
	t.Parallel()
	b := setupLapse(t, server.Config{ReclaimWindow: 100 * time.Millisecond})
	b.dispatch(t, 0)
	b.cancel(t)
	b.dispatch(t, 1)
	b.cancel(t)
	b.dispatch(t, 2)
	b.answer(conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY, "")      // attempt 1, late
	b.answer(conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY, "") // attempt 2, late
	servertest.Eventually(t, 10*time.Second, "two late results counted", func() bool { return b.s.Stats().LateResults == 2 })
	b.answer(conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS, "")
	b.waitCompleted(t, 2)
}

// TestAttemptIDsFenceResults: with attempt ids echoed, answers may come in
// any order: the live attempt's applies, the lapsed one's is dropped.
func TestAttemptIDsFenceResults(t *testing.T) {
	t.Parallel()
	b := setupLapse(t, server.Config{ReclaimWindow: 100 * time.Millisecond})
	first := b.dispatch(t, 0)
	b.cancel(t)
	second := b.dispatch(t, 1)
	if first.GetAttemptId() == second.GetAttemptId() {
		t.Fatalf("two deliveries share attempt id %q", first.GetAttemptId())
	}
	b.answer(conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS, second.GetAttemptId()) // the live one first
	b.waitCompleted(t, 1)
	b.answer(conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY, first.GetAttemptId())
	servertest.Eventually(t, 10*time.Second, "the late result counted", func() bool { return b.s.Stats().LateResults == 1 })
	if got := b.state(t, b.id); got.GetState() != conveyorv1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("the lapsed attempt's answer changed the task to %v", got.GetState())
	}
}

// TestLapsedSlotStaysTaken: after a lapse the worker still owes the
// Result, so a concurrency-1 worker is sent nothing more until it answers
// (the reclaim window here is an hour).
func TestLapsedSlotStaysTaken(t *testing.T) {
	t.Parallel()
	b := setupLapse(t, server.Config{ReclaimWindow: time.Hour}, "other")
	d := b.w.next(20 * time.Second).GetDispatch()
	if c := b.w.next(20 * time.Second).GetCancel(); c.GetTaskId() != d.GetTask().GetId() {
		t.Fatalf("want a Cancel for %s, got %v", d.GetTask().GetId(), c)
	}
	// The Cancel went out in the burst that would have carried the next
	// Dispatch: had the slot been freed, the other task would be leased.
	q, err := adminClient(t, b.s).ListQueues(context.Background(), connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := q.Msg.GetQueues()[0]; got.GetActive() != 0 || got.GetPending() != 2 {
		t.Fatalf("after the lapse: %d active, %d pending; want 0 and 2 (the slot is still owed)", got.GetActive(), got.GetPending())
	}
	b.w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: d.GetTask().GetId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY}}})
	if next := b.w.next(20 * time.Second).GetDispatch(); next == nil {
		t.Fatal("no dispatch after the late answer gave the slot back")
	}
}

// TestReclaimWindowReturnsTheSlotOnce: a worker that never answers a
// lapsed delivery gets its slot back after the window, and its late answer
// afterwards does not free a second slot.
func TestReclaimWindowReturnsTheSlotOnce(t *testing.T) {
	t.Parallel()
	const window = 300 * time.Millisecond
	b := setupLapse(t, server.Config{ReclaimWindow: window}, "other", "third")
	first := b.w.next(20 * time.Second).GetDispatch()
	cancelAt := time.Now()
	b.w.next(20 * time.Second).GetCancel()
	second := b.w.next(20 * time.Second).GetDispatch()
	if waited := time.Since(cancelAt); waited < window {
		t.Fatalf("the next dispatch came %s after the lapse, before the %s reclaim window", waited, window)
	}
	// Keep the second delivery alive and answer the first, late.
	b.w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Heartbeat{Heartbeat: &conveyorv1.Heartbeat{
		ActiveAttemptIds: []string{second.GetAttemptId()}}}})
	b.w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: first.GetTask().GetId(), AttemptId: first.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}}})
	servertest.Eventually(t, 10*time.Second, "the late result counted", func() bool { return b.s.Stats().LateResults == 1 })
	w, err := adminClient(t, b.s).ListWorkers(context.Background(), connect.NewRequest(&conveyorv1.ListWorkersRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Msg.GetWorkers()[0]; got.GetInFlight() != 1 || len(got.GetTaskIds()) != 1 || got.GetTaskIds()[0] != second.GetTask().GetId() {
		t.Fatalf("worker holds %d slots (%v), want 1 (the second delivery)", got.GetInFlight(), got.GetTaskIds())
	}
}
