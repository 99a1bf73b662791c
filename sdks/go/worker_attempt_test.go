package conveyor_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// The real server does not send attempt ids yet, so these tests fake one
// that does (see worker_fake_test.go).

func wtAttemptDispatch(id, attempt, payload string) *conveyorv1.ServerMessage {
	m := wtDispatch(id, "t", payload, nil, time.Now().Add(time.Hour))
	m.GetDispatch().Task.AttemptId = attempt
	m.GetDispatch().AttemptId = attempt
	return m
}

// wtIsHeartbeatWith matches a heartbeat listing exactly tasks by task id
// and exactly attempts by attempt id.
func wtIsHeartbeatWith(tasks, attempts []string) func(*conveyorv1.WorkerMessage) bool {
	byTask := wtIsHeartbeatOf(tasks...)
	attempts = slices.Sorted(slices.Values(attempts))
	return func(m *conveyorv1.WorkerMessage) bool {
		return byTask(m) && slices.Equal(slices.Sorted(slices.Values(m.GetHeartbeat().GetActiveAttemptIds())), attempts)
	}
}

// TestWorkerFakeAttemptIDs: the worker echoes each delivery's attempt id in
// its Result and lists the attempt of every delivery it holds in each
// Heartbeat (beside the task ids), for plain dispatches, a redelivery of a
// task still held, batches and a refused batch.
func TestWorkerFakeAttemptIDs(t *testing.T) {
	t.Parallel()
	f := &wtFake{}
	url := wtStartFake(t, f)
	b := newWTBlocker()
	seen := make(chan string, 16)
	release := make(chan struct{})
	w := wtNewWorker(t, url, conveyor.WithConcurrency(2))
	w.Handle("t", conveyor.HandlerFunc(func(ctx context.Context, d *conveyor.Delivery) error {
		seen <- d.ID + "@" + d.AttemptID
		return b.ProcessTask(ctx, d)
	}))
	w.HandleBatch("agg", conveyor.BatchHandlerFunc(func(_ context.Context, batch *conveyor.DeliveryBatch) error {
		for _, d := range batch.Tasks {
			seen <- d.ID + "@" + d.AttemptID
		}
		<-release
		return nil
	}))
	wtRun(t, w)
	s := f.session(t)

	// A plain dispatch, and one that names its attempt on the Dispatch only.
	s.send(wtAttemptDispatch("A", "a1", `"block"`))
	only := wtDispatch("B", "t", `"block"`, nil, time.Now().Add(time.Hour))
	only.GetDispatch().AttemptId = "b1"
	s.send(only)
	got := []string{wtRecv(t, seen, 10*time.Second, "a start"), wtRecv(t, seen, 10*time.Second, "a start")}
	slices.Sort(got)
	if !slices.Equal(got, []string{"A@a1", "B@b1"}) {
		t.Fatalf("handlers saw %v, want A@a1 and B@b1", got)
	}
	s.next("a heartbeat of a1 and b1", wtIsHeartbeatWith([]string{"A", "B"}, []string{"a1", "b1"}), wtNoResult(t))

	// A's lease lapses and A comes back as a2 while a1 still runs: both
	// attempts are held, a1 is answered first, each with its own id.
	s.send(wtCancel("A"))
	s.send(wtAttemptDispatch("A", "a2", `"ok"`))
	r1 := s.next("a1's result", wtIsResult("A"), nil).GetResult()
	r2 := s.next("a2's result", wtIsResult("A"), nil).GetResult()
	if r1.GetAttemptId() != "a1" || r1.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY ||
		r2.GetAttemptId() != "a2" || r2.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Fatalf("results %v then %v, want a1 RETRY then a2 SUCCESS", r1, r2)
	}
	s.send(wtCancel("B"))
	if r := s.next("b1's result", wtIsResult("B"), nil).GetResult(); r.GetAttemptId() != "b1" {
		t.Fatalf("B's result = %v, want attempt b1", r)
	}
	s.next("an empty heartbeat", wtIsHeartbeatWith(nil, nil), wtNoResult(t))

	// A batch: every member's own attempt, in heartbeats and in the result.
	member := func(id, typ, attempt string) *conveyorv1.TaskEnvelope {
		return &conveyorv1.TaskEnvelope{Id: id, Queue: "default", Type: typ, Payload: []byte("{}"), AttemptId: attempt}
	}
	s.send(&conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_BatchDispatch{BatchDispatch: &conveyorv1.BatchDispatch{
		Group: "g", Deadline: timestamppb.New(time.Now().Add(time.Hour)),
		Tasks: []*conveyorv1.TaskEnvelope{member("X1", "agg", "x1"), member("X2", "agg", "x2")},
	}}})
	for range 2 {
		wtRecv(t, seen, 10*time.Second, "a batch member")
	}
	s.next("a heartbeat of x1 and x2", wtIsHeartbeatWith([]string{"X1", "X2"}, []string{"x1", "x2"}), wtNoResult(t))
	close(release)
	br := s.next("the batch result", func(m *conveyorv1.WorkerMessage) bool { return m.GetBatchResult() != nil }, wtNoResult(t))
	for _, r := range br.GetBatchResult().GetResults() {
		if want := map[string]string{"X1": "x1", "X2": "x2"}[r.GetTaskId()]; r.GetAttemptId() != want {
			t.Errorf("member %s answered for attempt %q, want %q", r.GetTaskId(), r.GetAttemptId(), want)
		}
	}

	// A batch of a type this worker has no batch handler for is released,
	// each member for its own attempt.
	s.send(&conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_BatchDispatch{BatchDispatch: &conveyorv1.BatchDispatch{
		Group: "h", Tasks: []*conveyorv1.TaskEnvelope{member("Y1", "t", "y1"), member("Y2", "t", "y2")},
	}}})
	br = s.next("the refused batch's result", func(m *conveyorv1.WorkerMessage) bool { return m.GetBatchResult() != nil }, wtNoResult(t))
	for _, r := range br.GetBatchResult().GetResults() {
		if want := map[string]string{"Y1": "y1", "Y2": "y2"}[r.GetTaskId()]; r.GetAttemptId() != want ||
			r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED {
			t.Errorf("refused member %v, want RELEASED for attempt %q", r, want)
		}
	}
}

// TestWorkerFakeNoAttemptIDs: from a server that sends no attempt ids, the
// worker sends none (and heartbeats by task id, as before).
func TestWorkerFakeNoAttemptIDs(t *testing.T) {
	t.Parallel()
	f := &wtFake{}
	url := wtStartFake(t, f)
	b := newWTBlocker()
	w := wtNewWorker(t, url)
	w.Handle("t", b)
	wtRun(t, w)
	s := f.session(t)
	s.send(wtDispatch("A", "t", `"block"`, nil, time.Now().Add(time.Hour)))
	wtRecv(t, b.started, 10*time.Second, "A starts")
	s.next("a heartbeat of A without attempts", wtIsHeartbeatWith([]string{"A"}, nil), wtNoResult(t))
	s.send(wtCancel("A"))
	if r := s.next("A's result", wtIsResult("A"), nil).GetResult(); r.GetAttemptId() != "" {
		t.Fatalf("A's result names attempt %q, want none", r.GetAttemptId())
	}
}

// TestWorkerFakeHeartbeatWithinServerBound: six full batches in flight
// from a fencing server are 120,000 ids (a task id and an attempt id per
// member), past the 100,000 the server accepts in one Heartbeat (it ends
// the session with invalid_argument, which stops the worker for good).
// The worker heartbeats them in several frames, each within the bound and
// listing a member's task id and attempt id together.
func TestWorkerFakeHeartbeatWithinServerBound(t *testing.T) {
	t.Parallel()
	const groups, members, serverBound = 6, 10_000, 100_000 // server.MaxGroupSize, server.MaxHeartbeatIDs
	f := &wtFake{heartbeat: 200 * time.Millisecond}
	url := wtStartFake(t, f)
	w := wtNewWorker(t, url, conveyor.WithConcurrency(groups))
	w.HandleBatch("agg", conveyor.BatchHandlerFunc(func(ctx context.Context, _ *conveyor.DeliveryBatch) error {
		<-ctx.Done()
		return ctx.Err()
	}))
	wtRun(t, w)
	s := f.session(t)
	for g := range groups {
		bd := &conveyorv1.BatchDispatch{Group: fmt.Sprint("g", g), Deadline: timestamppb.New(time.Now().Add(time.Hour))}
		for i := range members {
			id := fmt.Sprintf("T%d-%05d", g, i)
			bd.Tasks = append(bd.Tasks, &conveyorv1.TaskEnvelope{Id: id, Queue: "default", Type: "agg", AttemptId: "a-" + id})
		}
		s.send(&conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_BatchDispatch{BatchDispatch: bd}})
	}
	renewed := map[string]bool{} // task ids heartbeated, with their attempts
	// 60,000 members: the first heartbeats covering them all can take a
	// while under -race on a loaded machine; the bound is only a backstop.
	s.nextWithin(time.Minute, "heartbeats renewing every member", func(m *conveyorv1.WorkerMessage) bool {
		hb := m.GetHeartbeat()
		if hb == nil {
			return false
		}
		tasks, attempts := hb.GetActiveTaskIds(), hb.GetActiveAttemptIds()
		if n := len(tasks) + len(attempts); n > serverBound {
			t.Fatalf("a heartbeat lists %d ids; the server refuses more than %d", n, serverBound)
		}
		paired := make([]string, len(attempts))
		for i, a := range attempts {
			paired[i] = strings.TrimPrefix(a, "a-")
		}
		if !slices.Equal(slices.Sorted(slices.Values(tasks)), slices.Sorted(slices.Values(paired))) {
			t.Fatalf("a heartbeat lists %d task ids and %d attempt ids, not of the same deliveries", len(tasks), len(attempts))
		}
		for _, id := range tasks {
			renewed[id] = true
		}
		return len(renewed) == groups*members
	}, wtNoResult(t))
}
