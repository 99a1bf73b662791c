package conveyor_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

func wtBatch(group string, ids ...string) *conveyorv1.ServerMessage {
	bd := &conveyorv1.BatchDispatch{Group: group, Deadline: timestamppb.New(time.Now().Add(time.Hour))}
	for _, id := range ids {
		bd.Tasks = append(bd.Tasks, &conveyorv1.TaskEnvelope{Id: id, Queue: "default", Type: "agg",
			ContentType: "application/json", Payload: []byte("{}"), AttemptId: "a-" + id})
	}
	return &conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_BatchDispatch{BatchDispatch: bd}}
}

// wtNoAnswer fails the test on any Result or BatchResult frame.
func wtNoAnswer(t *testing.T) func(*conveyorv1.WorkerMessage) {
	return func(m *conveyorv1.WorkerMessage) {
		t.Helper()
		if m.GetResult() != nil || m.GetBatchResult() != nil {
			t.Fatalf("unexpected answer %v", m)
		}
	}
}

// TestWorkerFakeDrainParksLateBatch: a BatchDispatch that arrives during a
// drain is not started, every member stays listed in heartbeats (§5.10,
// §5.11), and the worker closes the stream without answering for it.
func TestWorkerFakeDrainParksLateBatch(t *testing.T) {
	t.Parallel()
	f := &wtFake{}
	url := wtStartFake(t, f)
	logs := wtLogWatch{msgs: make(chan string, 256)}
	release, started, batches := make(chan struct{}), make(chan string, 4), make(chan int, 4)
	w := wtNewWorker(t, url, conveyor.WithConcurrency(2), conveyor.WithDrainGrace(10*time.Second), conveyor.WithLogger(slog.New(logs)))
	w.HandleFunc("t", func(ctx context.Context, d *conveyor.Delivery) error {
		started <- d.ID
		<-release
		return nil
	})
	w.HandleBatch("agg", conveyor.BatchHandlerFunc(func(_ context.Context, b *conveyor.DeliveryBatch) error {
		batches <- len(b.Tasks)
		return nil
	}))
	run := wtRun(t, w)
	s := f.session(t)
	s.send(wtDispatch("A", "t", "{}", nil, time.Now().Add(time.Hour)))
	wtRecv(t, started, 10*time.Second, "A starts")
	shut := make(chan error, 1)
	go func() { shut <- w.Shutdown(context.Background()) }()
	logs.await(t, "worker draining")
	s.send(wtBatch("g", "X1", "X2"))
	s.next("a heartbeat listing A and the batch's members", wtIsHeartbeatOf("A", "X1", "X2"), wtNoAnswer(t))
	s.next("another heartbeat listing them", wtIsHeartbeatOf("A", "X1", "X2"), wtNoAnswer(t))
	close(release)
	s.next("A's result", wtIsResult("A"), wtNoAnswer(t))
	for m := range s.in {
		if m.GetResult() != nil || m.GetBatchResult() != nil {
			t.Fatalf("answer after the drain: %v", m)
		}
	}
	s.end <- nil
	if err := wtRecv(t, shut, 10*time.Second, "Shutdown returns"); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if err := run.wait(t, time.Second); err != nil {
		t.Fatalf("Run = %v", err)
	}
	select {
	case n := <-batches:
		t.Fatalf("a batch of %d started during the drain", n)
	default:
	}
}

// TestWorkerFakeRefusesUnhandledBatch: a BatchDispatch of a type the
// worker has no batch handler for is answered at once with one
// BatchResult releasing every member, with their attempt ids.
func TestWorkerFakeRefusesUnhandledBatch(t *testing.T) {
	t.Parallel()
	f := &wtFake{}
	url := wtStartFake(t, f)
	w := wtNewWorker(t, url)
	w.HandleFunc("agg", func(context.Context, *conveyor.Delivery) error {
		return conveyor.SkipRetry(errors.New("a batch member ran as a plain task"))
	})
	wtRun(t, w)
	s := f.session(t)
	if bt := s.hello.GetBatchTypes(); len(bt) != 0 {
		t.Fatalf("hello.batch_types = %v, want none", bt)
	}
	s.send(wtBatch("g", "X1", "X2"))
	br := s.next("the batch result", func(m *conveyorv1.WorkerMessage) bool { return m.GetBatchResult() != nil }, nil).GetBatchResult()
	if len(br.GetResults()) != 2 {
		t.Fatalf("batch result %v, want two results", br)
	}
	for _, r := range br.GetResults() {
		if r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED || r.GetAttemptId() != "a-"+r.GetTaskId() {
			t.Fatalf("result %v, want RELEASED with its attempt id", r)
		}
	}
}

// TestWorkerFakeCancelAfterResult: a Cancel that crosses the task's Result
// on the wire (it finished) is ignored: no second Result, and the worker
// carries on.
func TestWorkerFakeCancelAfterResult(t *testing.T) {
	t.Parallel()
	f := &wtFake{}
	url := wtStartFake(t, f)
	w := wtNewWorker(t, url, conveyor.WithConcurrency(1))
	w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error { return nil })
	wtRun(t, w)
	s := f.session(t)
	far := time.Now().Add(time.Hour)
	s.send(wtDispatch("A", "t", "{}", nil, far))
	if r := s.next("A's result", wtIsResult("A"), nil).GetResult(); r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Fatalf("A's result = %v", r)
	}
	s.send(wtCancel("A"))
	s.send(wtDispatch("B", "t", "{}", nil, far))
	if r := s.next("B's result", func(m *conveyorv1.WorkerMessage) bool { return m.GetResult() != nil }, nil).GetResult(); r.GetTaskId() != "B" ||
		r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Fatalf("after the late Cancel, got result %v, want B's SUCCESS", r)
	}
	s.next("an empty heartbeat", wtIsHeartbeatOf(), wtNoAnswer(t))
}

// TestWorkerFakeDrainReleasesARunningBatch: a batch still running when the
// drain grace ends is canceled (cause ErrWorkerShutdown) and answered with
// one BatchResult releasing every member (§5.10: never RETRY for a task a
// drain abandons), before the worker closes its side.
func TestWorkerFakeDrainReleasesARunningBatch(t *testing.T) {
	t.Parallel()
	f := &wtFake{}
	url := wtStartFake(t, f)
	running, causes := make(chan struct{}, 1), make(chan error, 1)
	w := wtNewWorker(t, url, conveyor.WithConcurrency(1), conveyor.WithDrainGrace(50*time.Millisecond))
	w.HandleBatch("agg", conveyor.BatchHandlerFunc(func(ctx context.Context, _ *conveyor.DeliveryBatch) error {
		running <- struct{}{}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return ctx.Err()
	}))
	run := wtRun(t, w)
	s := f.session(t)
	s.send(wtBatch("g", "X1", "X2", "X3"))
	wtRecv(t, running, 10*time.Second, "the batch runs")
	shut := make(chan error, 1)
	go func() { shut <- w.Shutdown(context.Background()) }()
	if c := wtRecv(t, causes, 10*time.Second, "the batch's cancellation"); !errors.Is(c, conveyor.ErrWorkerShutdown) {
		t.Fatalf("the batch's cause = %v, want ErrWorkerShutdown", c)
	}
	br := s.next("the batch result", func(m *conveyorv1.WorkerMessage) bool { return m.GetBatchResult() != nil }, wtNoAnswer(t)).GetBatchResult()
	if len(br.GetResults()) != 3 {
		t.Fatalf("batch result %v, want three results", br)
	}
	for _, r := range br.GetResults() {
		if r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED || r.GetAttemptId() != "a-"+r.GetTaskId() {
			t.Fatalf("result %v, want RELEASED with its attempt id", r)
		}
	}
	for m := range s.in {
		if m.GetResult() != nil || m.GetBatchResult() != nil {
			t.Fatalf("answer after the batch's: %v", m)
		}
	}
	s.end <- nil
	if err := wtRecv(t, shut, 10*time.Second, "Shutdown returns"); err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if err := run.wait(t, time.Second); err != nil {
		t.Fatalf("Run = %v", err)
	}
}
