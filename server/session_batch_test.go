package server_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// partialLapse is a batch worker of concurrency 1 holding one
// BatchDispatch of two members: a, with no timeout, which it keeps alive
// by heartbeats, and b, whose one-second timeout made its lease lapse on
// its own (the worker has been sent Cancel for b).
type partialLapse struct {
	s     *servertest.Server
	w     *rawWorker
	a, b  *conveyorv1.TaskEnvelope
	tasks interface {
		GetTask(context.Context, *connect.Request[conveyorv1.GetTaskRequest]) (*connect.Response[conveyorv1.TaskInfo], error)
	}
}

func setupPartialLapse(t *testing.T, reclaimWindow time.Duration) *partialLapse {
	t.Helper()
	s := servertest.Start(t, server.Config{LeaseTTL: 10 * time.Second, LimitGrace: time.Millisecond,
		ReclaimWindow: reclaimWindow, GroupPolicy: brokerGroupPolicy(2, time.Hour, time.Hour)})
	tasks := taskClient(t, s, servertest.GRPC)
	enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "q", Type: "sum", Options: &conveyorv1.TaskOptions{Group: "g"}})
	enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "q", Type: "sum",
		Options: &conveyorv1.TaskOptions{Group: "g", Timeout: durationpb.New(time.Second)}})
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 1,
		BatchTypes: []string{"sum"}})
	if err != nil {
		t.Fatal(err)
	}
	bd := w.next(10 * time.Second).GetBatchDispatch()
	if len(bd.GetTasks()) != 2 || bd.GetTasks()[1].GetOptions().GetTimeout() == nil {
		t.Fatalf("got %v, want a BatchDispatch of both members, the one with a timeout second", bd)
	}
	p := &partialLapse{s: s, w: w, a: bd.GetTasks()[0], b: bd.GetTasks()[1], tasks: tasks}
	p.heartbeat()
	if c := w.next(10 * time.Second).GetCancel(); c.GetTaskId() != p.b.GetId() {
		t.Fatalf("got %v, want the Cancel of member b %s", c, p.b.GetId())
	}
	p.heartbeat()
	return p
}

func (p *partialLapse) heartbeat() {
	p.w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Heartbeat{Heartbeat: &conveyorv1.Heartbeat{
		ActiveTaskIds:    []string{p.a.GetId(), p.b.GetId()},
		ActiveAttemptIds: []string{p.a.GetAttemptId(), p.b.GetAttemptId()}}}})
}

func (p *partialLapse) batchResult(rs ...*conveyorv1.Result) {
	p.w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_BatchResult{BatchResult: &conveyorv1.BatchResult{Results: rs}}})
}

func result(e *conveyorv1.TaskEnvelope, outcome conveyorv1.TaskOutcome) *conveyorv1.Result {
	return &conveyorv1.Result{TaskId: e.GetId(), AttemptId: e.GetAttemptId(), Outcome: outcome, ErrorMsg: outcome.String()}
}

// redispatched waits for the session's next frame and requires it to be a
// plain Dispatch of e with retried as given.
func (p *partialLapse) redispatched(t *testing.T, e *conveyorv1.TaskEnvelope, retried int32, within time.Duration) {
	t.Helper()
	m := p.w.next(within)
	if d := m.GetDispatch(); d.GetTask().GetId() != e.GetId() || d.GetTask().GetRetried() != retried {
		t.Fatalf("got %v, want a Dispatch of %s with retried %d", m, e.GetId(), retried)
	}
}

// TestBatchResultAnswersALapsedMemberItLeavesOut: b lapsed, then the
// worker's BatchResult answers a and leaves b out, as §5.11 allows. The
// BatchResult is the batch's answer, so the slot comes back at once
// (the reclaim window is a minute) and b, pending again, is redelivered
// to this session.
func TestBatchResultAnswersALapsedMemberItLeavesOut(t *testing.T) {
	t.Parallel()
	p := setupPartialLapse(t, time.Minute)
	p.batchResult(result(p.a, conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS))
	p.redispatched(t, p.b, 1, 10*time.Second)
}

// TestBatchResultOfLapsedMembersReleasesTheOthers: after b lapsed, the
// BatchResult names only b and leaves a out, so a is RELEASED at once, with
// no retry counted (not left to lapse, with a retry, once the worker stops
// heartbeating it), and the slot comes back: the session is sent b (pending
// since its lapse, so first in line), then a.
func TestBatchResultOfLapsedMembersReleasesTheOthers(t *testing.T) {
	t.Parallel()
	p := setupPartialLapse(t, time.Minute)
	p.batchResult(result(p.b, conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY))
	p.redispatched(t, p.b, 1, 20*time.Second)
	p.w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{
		Result: &conveyorv1.Result{TaskId: p.b.GetId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}}})
	p.redispatched(t, p.a, 0, 10*time.Second)
}

// TestAnsweringTheLastLiveMemberStartsTheReclaimWindow: b lapsed, then a
// is answered by a plain Result (not a BatchResult), and b is never
// answered. Only lapsed members are left owing, so the reclaim window
// starts: the slot comes back after it and b is redelivered.
func TestAnsweringTheLastLiveMemberStartsTheReclaimWindow(t *testing.T) {
	t.Parallel()
	p := setupPartialLapse(t, time.Second)
	p.w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{
		Result: result(p.a, conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS)}})
	p.redispatched(t, p.b, 1, 15*time.Second)
}

// TestBatchesAreBoundedBySessionBytes: MaxSessionBytes bounds the bytes a
// session holds unanswered for BatchDispatches as for Dispatches. Each
// group here (4 members of 900 KiB) is larger than the whole budget, so
// the session is sent one batch at a time (one is always allowed while it
// holds nothing) though its concurrency is 10: whenever a batch arrives,
// only its own 4 members are leased.
func TestBatchesAreBoundedBySessionBytes(t *testing.T) {
	t.Parallel()
	const member, size, groups = 900 << 10, 4, 4
	// Room for three worst-case single envelopes (payload, metadata and
	// 512 bytes of overhead each), less than one of these groups.
	const budget = 3 * (server.MaxPayloadBytes + server.MaxMetadataBytes + 512)
	s := servertest.Start(t, server.Config{MaxSessionBytes: budget, GroupPolicy: brokerGroupPolicy(size, time.Hour, time.Hour)})
	tasks := taskClient(t, s, servertest.GRPC)
	for range groups * size {
		enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "q", Type: "sum", Payload: make([]byte, member),
			Options: &conveyorv1.TaskOptions{Group: "g"}})
	}
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 10,
		BatchTypes: []string{"sum"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range groups {
		bd := w.next(10 * time.Second).GetBatchDispatch()
		if len(bd.GetTasks()) != size {
			t.Fatalf("batch %d: got %v, want a BatchDispatch of %d members", i, bd, size)
		}
		if a := queueCounts(t, s, "q").GetActive(); a != size {
			t.Fatalf("batch %d: %d tasks active while the session holds one batch of %d over its byte budget", i, a, size)
		}
		var rs []*conveyorv1.Result
		for _, e := range bd.GetTasks() {
			rs = append(rs, result(e, conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS))
		}
		w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_BatchResult{BatchResult: &conveyorv1.BatchResult{Results: rs}}})
	}
	servertest.Eventually(t, 10*time.Second, "every member completed", func() bool {
		return queueCounts(t, s, "q").GetCompleted() == groups*size
	})
}

// TestSmallBatchesFillTheWindow: small batches are far below the byte
// budget, so a session is sent as many as its concurrency allows without
// answering any, also when the budget is below what a batch may cost at
// most (each is charged what it holds).
func TestSmallBatchesFillTheWindow(t *testing.T) {
	t.Parallel()
	for _, budget := range []int64{0, 16 << 20} { // the default, and under a batch's worst case
		t.Run(fmt.Sprintf("MaxSessionBytes=%d", budget), func(t *testing.T) {
			t.Parallel()
			const batches = 6
			s := servertest.Start(t, server.Config{MaxSessionBytes: budget, GroupPolicy: brokerGroupPolicy(2, time.Hour, time.Hour)})
			enqueueGrouped(t, taskClient(t, s, servertest.GRPC), 2*batches)
			w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: batches,
				BatchTypes: []string{"sum"}})
			if err != nil {
				t.Fatal(err)
			}
			for i := range batches { // none answered
				if bd := w.next(10 * time.Second).GetBatchDispatch(); len(bd.GetTasks()) != 2 {
					t.Fatalf("batch %d of %d unanswered ones: got %v, want a BatchDispatch of 2", i, batches, bd)
				}
			}
		})
	}
}

// enqueueGrouped enqueues n tiny tasks of type "sum" into group "g" of
// queue "q".
func enqueueGrouped(t *testing.T, tasks conveyorv1connect.TaskServiceClient, n int) {
	t.Helper()
	for range n {
		enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "q", Type: "sum", Payload: []byte("x"),
			Options: &conveyorv1.TaskOptions{Group: "g"}})
	}
}

// TestBatchWhileATaskIsHeld: a session that holds a task unanswered is
// still sent a fired group of its batch type.
func TestBatchWhileATaskIsHeld(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{MaxSessionBytes: 16 << 20, GroupPolicy: brokerGroupPolicy(2, time.Hour, time.Hour)})
	tasks := taskClient(t, s, servertest.GRPC)
	enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "q", Type: "single", Payload: []byte("x")})
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 4,
		BatchTypes: []string{"sum"}})
	if err != nil {
		t.Fatal(err)
	}
	if d := w.next(10 * time.Second).GetDispatch(); d == nil {
		t.Fatal("the single task was not dispatched")
	}
	enqueueGrouped(t, tasks, 2)
	if bd := w.next(10 * time.Second).GetBatchDispatch(); len(bd.GetTasks()) != 2 {
		t.Fatalf("got %v, want the fired group of 2 while the single is held", bd)
	}
}
