package server_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func resultFrame(r *conveyorv1.Result) *conveyorv1.WorkerMessage {
	return &conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: r}}
}

func getTask(t *testing.T, tasks interface {
	GetTask(context.Context, *connect.Request[conveyorv1.GetTaskRequest]) (*connect.Response[conveyorv1.TaskInfo], error)
}, id string) *conveyorv1.TaskInfo {
	t.Helper()
	got, err := tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
	if err != nil {
		t.Fatal(err)
	}
	return got.Msg
}

// TestReleasedOutcomesRequeueWithoutPenalty: RELEASED, UNSPECIFIED (which
// the server treats as RELEASED, protocol §5.8) and an outcome number this
// server does not know each hand the task back due at once, its retry count
// unchanged, and free the slot: the task comes straight back.
func TestReleasedOutcomesRequeueWithoutPenalty(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	id := enqueueN(t, tasks, "rel", "t", 1)[0]
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"rel": 1}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, outcome := range []conveyorv1.TaskOutcome{conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED,
		conveyorv1.TaskOutcome_TASK_OUTCOME_UNSPECIFIED, conveyorv1.TaskOutcome(99)} {
		d := w.next(10 * time.Second).GetDispatch()
		if d.GetTask().GetId() != id || d.GetTask().GetRetried() != 0 {
			t.Fatalf("before %v: got dispatch %v, want task %s with retried 0", outcome, d, id)
		}
		w.send(resultFrame(&conveyorv1.Result{TaskId: id, AttemptId: d.GetAttemptId(), Outcome: outcome}))
	}
	d := w.next(10 * time.Second).GetDispatch()
	if d.GetTask().GetId() != id || d.GetTask().GetRetried() != 0 {
		t.Fatalf("after the releases: got dispatch %v, want task %s with retried 0", d, id)
	}
	w.send(resultFrame(&conveyorv1.Result{TaskId: id, AttemptId: d.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}))
	servertest.Eventually(t, 10*time.Second, "completed with no retry counted", func() bool {
		got := getTask(t, tasks, id)
		return got.GetState() == conveyorv1.TaskState_TASK_STATE_COMPLETED && got.GetRetried() == 0
	})
}

// TestSecondHelloFailsTheStream: Hello is only the first frame (§5.2); a
// second one is a protocol error.
func TestSecondHelloFailsTheStream(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	hello := &conveyorv1.Hello{Queues: map[string]int32{"h2": 1}, Concurrency: 1}
	w, _, err := openSession(t, s, servertest.GRPC, hello)
	if err != nil {
		t.Fatal(err)
	}
	_ = w.stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Hello{Hello: hello}})
	err = <-w.end
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "first frame") {
		t.Fatalf("a second Hello: %v, want invalid_argument", err)
	}
}

// TestCanceledRunningTaskIsNeverRedelivered: an ACTIVE task an operator
// canceled ends CANCELED when its worker answers RELEASED, closes the
// stream or lets the lease lapse (CONTRACT.md, CancelTask), and is not
// dispatched again.
func TestCanceledRunningTaskIsNeverRedelivered(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"released", "closed", "lapsed"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			cfg := server.Config{}
			if how == "lapsed" {
				// The lapsed delivery keeps its slot (the worker never
				// answers it), so the next task goes to a new session.
				cfg = server.Config{LeaseTTL: time.Second, ReclaimWindow: time.Hour}
			}
			s := servertest.Start(t, cfg)
			tasks := taskClient(t, s, servertest.GRPC)
			id := enqueueN(t, tasks, "cx", "t", 1)[0]
			hello := &conveyorv1.Hello{Queues: map[string]int32{"cx": 1}, Concurrency: 1}
			w, _, err := openSession(t, s, servertest.GRPC, hello)
			if err != nil {
				t.Fatal(err)
			}
			d := w.next(10 * time.Second).GetDispatch()
			if _, err := adminClient(t, s).CancelTask(context.Background(), connect.NewRequest(&conveyorv1.CancelTaskRequest{Id: id})); err != nil {
				t.Fatal(err)
			}
			if c := w.next(10 * time.Second).GetCancel(); c.GetTaskId() != id {
				t.Fatalf("want a Cancel for %s, got %v", id, c)
			}
			switch how {
			case "released":
				w.send(resultFrame(&conveyorv1.Result{TaskId: id, AttemptId: d.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED}))
			case "closed":
				_ = w.stream.CloseRequest()
				if err := <-w.end; !errors.Is(err, io.EOF) {
					t.Fatalf("close: %v", err)
				}
			}
			servertest.Eventually(t, 10*time.Second, "canceled", func() bool {
				return getTask(t, tasks, id).GetState() == conveyorv1.TaskState_TASK_STATE_CANCELED
			})
			// A task enqueued after it is the next (and only) dispatch.
			if how != "released" {
				if w, _, err = openSession(t, s, servertest.GRPC, hello); err != nil {
					t.Fatal(err)
				}
			}
			next := enqueueN(t, tasks, "cx", "t", 1)[0]
			if d := w.next(10 * time.Second).GetDispatch(); d.GetTask().GetId() != next {
				t.Fatalf("after the cancel, got dispatch %v, want %s", d, next)
			}
		})
	}
}

// TestHeartbeatExtendsOnlyTheTasksItLists: a task a worker leaves out of
// its heartbeats lapses (a retry counted, §5.6), while the one it lists
// keeps its lease and completes on its first attempt.
func TestHeartbeatExtendsOnlyTheTasksItLists(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{LeaseTTL: time.Second})
	tasks := taskClient(t, s, servertest.GRPC)
	enqueueN(t, tasks, "hb", "t", 2)
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"hb": 1}, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	kept := w.next(10 * time.Second).GetDispatch()
	dropped := w.next(10 * time.Second).GetDispatch()
	stop := make(chan struct{})
	beating := make(chan struct{})
	go func() {
		defer close(beating)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			hb := &conveyorv1.Heartbeat{ActiveTaskIds: []string{kept.GetTask().GetId()}}
			if w.stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Heartbeat{Heartbeat: hb}}) != nil {
				return
			}
			select {
			case <-tick.C:
			case <-stop:
				return
			}
		}
	}()
	if c := w.next(20 * time.Second).GetCancel(); c.GetTaskId() != dropped.GetTask().GetId() {
		t.Fatalf("want a Cancel for the unlisted task %s, got %v", dropped.GetTask().GetId(), c)
	}
	servertest.Eventually(t, 10*time.Second, "the unlisted task retried", func() bool {
		return getTask(t, tasks, dropped.GetTask().GetId()).GetRetried() == 1
	})
	// The listed task was leased first, so without its heartbeats it would
	// have lapsed no later than the other: it is still held.
	close(stop)
	<-beating
	if got := getTask(t, tasks, kept.GetTask().GetId()); got.GetState() != conveyorv1.TaskState_TASK_STATE_ACTIVE || got.GetRetried() != 0 {
		t.Fatalf("the listed task is %v with retried %d, want ACTIVE with 0", got.GetState(), got.GetRetried())
	}
	w.send(resultFrame(&conveyorv1.Result{TaskId: kept.GetTask().GetId(), AttemptId: kept.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}))
	servertest.Eventually(t, 10*time.Second, "the listed task completed", func() bool {
		got := getTask(t, tasks, kept.GetTask().GetId())
		return got.GetState() == conveyorv1.TaskState_TASK_STATE_COMPLETED && got.GetRetried() == 0
	})
}

// TestResultFromAnotherSessionIsDropped: a Result for a task leased to
// another session (even echoing that session's attempt id) is dropped; the
// holder's own Result decides.
func TestResultFromAnotherSessionIsDropped(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	id := enqueueN(t, tasks, "xs", "t", 1)[0]
	hello := &conveyorv1.Hello{Queues: map[string]int32{"xs": 1}, Concurrency: 1}
	holder, _, err := openSession(t, s, servertest.GRPC, hello)
	if err != nil {
		t.Fatal(err)
	}
	d := holder.next(10 * time.Second).GetDispatch()
	other, _, err := openSession(t, s, servertest.GRPC, hello)
	if err != nil {
		t.Fatal(err)
	}
	other.send(resultFrame(&conveyorv1.Result{TaskId: id, Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY}))
	other.send(resultFrame(&conveyorv1.Result{TaskId: id, AttemptId: d.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY}))
	servertest.Eventually(t, 10*time.Second, "both dropped as unknown", func() bool { return s.Stats().UnknownResults == 2 })
	if got := getTask(t, tasks, id); got.GetState() != conveyorv1.TaskState_TASK_STATE_ACTIVE {
		t.Fatalf("after another session's Results the task is %v, want ACTIVE", got.GetState())
	}
	holder.send(resultFrame(&conveyorv1.Result{TaskId: id, AttemptId: d.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}))
	servertest.Eventually(t, 10*time.Second, "completed by its holder", func() bool {
		return getTask(t, tasks, id).GetState() == conveyorv1.TaskState_TASK_STATE_COMPLETED
	})
}

// TestBatchResultWithMembersMissingGivesTheSlotBack: a BatchResult that
// answers one member of three releases the other two (no retry counted,
// §5.11) and gives back the batch's one slot, so a worker of concurrency 1
// gets them back, one plain Dispatch at a time.
func TestBatchResultWithMembersMissingGivesTheSlotBack(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{GroupPolicy: brokerGroupPolicy(3, time.Hour, time.Hour)})
	tasks := taskClient(t, s, servertest.GRPC)
	for range 3 {
		if _, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "bm", Type: "sum",
			Options: &conveyorv1.TaskOptions{Group: "g"}})); err != nil {
			t.Fatal(err)
		}
	}
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"bm": 1}, Concurrency: 1, BatchTypes: []string{"sum"}})
	if err != nil {
		t.Fatal(err)
	}
	bd := w.next(10 * time.Second).GetBatchDispatch()
	if len(bd.GetTasks()) != 3 {
		t.Fatalf("got %v, want a BatchDispatch of 3", bd)
	}
	first := bd.GetTasks()[0]
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_BatchResult{BatchResult: &conveyorv1.BatchResult{Results: []*conveyorv1.Result{
		{TaskId: first.GetId(), AttemptId: first.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}}}}})
	left := map[string]bool{bd.GetTasks()[1].GetId(): true, bd.GetTasks()[2].GetId(): true}
	for len(left) > 0 {
		d := w.next(10 * time.Second).GetDispatch()
		if !left[d.GetTask().GetId()] || d.GetTask().GetRetried() != 0 {
			t.Fatalf("got dispatch %v, want one of the members left out, with retried 0", d)
		}
		delete(left, d.GetTask().GetId())
		w.send(resultFrame(&conveyorv1.Result{TaskId: d.GetTask().GetId(), AttemptId: d.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}))
	}
	servertest.Eventually(t, 10*time.Second, "all three completed", func() bool { return queueCounts(t, s, "bm").GetCompleted() == 3 })
}

// slowReleaseBroker holds each Release until the test has seen the
// worker's stream end, or for at most a second.
type slowReleaseBroker struct {
	broker.Broker
	streamEnded chan struct{}
}

func (b *slowReleaseBroker) Release(ctx context.Context, p broker.ReleaseParams) error {
	select {
	case <-b.streamEnded:
	case <-time.After(time.Second):
	}
	return b.Broker.Release(ctx, p)
}

// TestLeasesAreReleasedBeforeTheStreamEnds: once a worker sees its
// session end, the tasks it held are no longer leased to it (§5.10's
// safety net): a worker that closes its side and looks, or a supervisor
// that checks the task once the worker has exited, finds it PENDING. The
// broker here holds each Release until the worker saw its stream end, so
// a server that ended the stream first would show the task ACTIVE.
func TestLeasesAreReleasedBeforeTheStreamEnds(t *testing.T) {
	t.Parallel()
	rb := &slowReleaseBroker{streamEnded: make(chan struct{})}
	s := startWrapped(t, server.Config{}, func(b broker.Broker) broker.Broker { rb.Broker = b; return rb })
	tasks := taskClient(t, s, servertest.GRPC)
	id := enqueueN(t, tasks, "rb", "t", 1)[0]
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"rb": 1}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if d := w.next(10 * time.Second).GetDispatch(); d.GetTask().GetId() != id {
		t.Fatalf("got %v, want the dispatch of %s", d, id)
	}
	if err := w.stream.CloseRequest(); err != nil {
		t.Fatal(err)
	}
	if err := <-w.end; !errors.Is(err, io.EOF) {
		t.Fatalf("stream end after close: %v", err)
	}
	got := getTask(t, tasks, id)
	close(rb.streamEnded)
	if got.GetState() != conveyorv1.TaskState_TASK_STATE_PENDING || got.GetRetried() != 0 {
		t.Fatalf("once the stream ended the task is %v with retried %d, want PENDING with 0", got.GetState(), got.GetRetried())
	}
}

// TestDuplicateResultFreesNoSecondSlot: a Result sent twice is applied
// once; the repeat is dropped and gives back no slot, so a worker of
// concurrency 1 that holds the next task is seen holding exactly it.
func TestDuplicateResultFreesNoSecondSlot(t *testing.T) {
	t.Parallel()
	for _, withAttempt := range []bool{true, false} {
		s := servertest.Start(t, server.Config{})
		tasks := taskClient(t, s, servertest.GRPC)
		ids := enqueueN(t, tasks, "dup", "t", 2)
		w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"dup": 1}, Concurrency: 1})
		if err != nil {
			t.Fatal(err)
		}
		d := w.next(10 * time.Second).GetDispatch()
		r := &conveyorv1.Result{TaskId: d.GetTask().GetId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}
		if withAttempt {
			r.AttemptId = d.GetAttemptId()
		}
		w.send(resultFrame(r))
		w.send(resultFrame(r))
		if next := w.next(10 * time.Second).GetDispatch(); next.GetTask().GetId() != ids[1] {
			t.Fatalf("got %v, want the dispatch of %s", next, ids[1])
		}
		servertest.Eventually(t, 10*time.Second, "the repeat dropped", func() bool { return s.Stats().UnknownResults == 1 })
		res, err := adminClient(t, s).ListWorkers(context.Background(), connect.NewRequest(&conveyorv1.ListWorkersRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		if ws := res.Msg.GetWorkers(); len(ws) != 1 || ws[0].GetInFlight() != 1 || len(ws[0].GetTaskIds()) != 1 || ws[0].GetTaskIds()[0] != ids[1] {
			t.Fatalf("attempt ids %v: workers %v, want one holding %s alone in its one slot", withAttempt, ws, ids[1])
		}
		if got := getTask(t, tasks, ids[0]); got.GetState() != conveyorv1.TaskState_TASK_STATE_COMPLETED {
			t.Fatalf("the answered task is %v, want COMPLETED", got.GetState())
		}
	}
}
