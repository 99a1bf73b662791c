package server_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// reapFirstBroker holds a worker's Result back until the reaper has taken
// a lease back: a Result that arrives as its lease lapses, with the reaper
// winning the race.
type reapFirstBroker struct {
	broker.Broker
	reclaimed chan struct{} // closed after the first Reclaim
	once      sync.Once
}

func (r *reapFirstBroker) Reclaim(ctx context.Context, ds []broker.Decision) error {
	err := r.Broker.Reclaim(ctx, ds)
	r.once.Do(func() { close(r.reclaimed) })
	return err
}

func (r *reapFirstBroker) Complete(ctx context.Context, d broker.Decision) (broker.State, error) {
	select {
	case <-r.reclaimed:
	case <-ctx.Done():
	}
	return r.Broker.Complete(ctx, d)
}

func (r *reapFirstBroker) CompleteBatch(ctx context.Context, ds []broker.Decision) ([]broker.Completion, error) {
	select {
	case <-r.reclaimed:
	case <-ctx.Done():
	}
	return r.Broker.CompleteBatch(ctx, ds)
}

// TestMetricsLapseRacingTheResult: when the reaper takes a lease back while
// the worker's Result for it is on its way into the engine, the lapse
// happened (the task is retried with one more retry counted), so
// conveyor_lease_expirations_total counts it, and the Result is a late one.
func TestMetricsLapseRacingTheResult(t *testing.T) {
	t.Parallel()
	s := startWrapped(t, server.Config{LeaseTTL: time.Second}, func(b broker.Broker) broker.Broker {
		return &reapFirstBroker{Broker: b, reclaimed: make(chan struct{})}
	})
	tasks := taskClient(t, s, servertest.GRPC)
	if _, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "race", Type: "slow",
		Options: &conveyorv1.TaskOptions{MaxRetry: 3}})); err != nil {
		t.Fatal(err)
	}
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"race": 1}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := w.next(10 * time.Second).GetDispatch()
	if d == nil {
		t.Fatal("the first frame after Welcome is not a Dispatch")
	}
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: d.GetTask().GetId(), AttemptId: d.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}}})
	servertest.Eventually(t, 20*time.Second, "the result dropped as late", func() bool {
		return value(scrape(t, s), "conveyor_results_dropped_total", "reason=late") == 1
	})
	if got := value(scrape(t, s), "conveyor_lease_expirations_total", "queue=race", "type=slow"); got != 1 {
		t.Errorf("conveyor_lease_expirations_total = %v, want the 1 lapse", got)
	}
}

// TestMetricsLapseArchivesForGood: a task whose worker never answers (it
// crashes every worker it reaches) is archived by the reaper once its
// retries are spent; conveyor_tasks_archived_total counts it with the
// lapse, so the "failing for good" alert sees a task that never sent a
// Result.
func TestMetricsLapseArchivesForGood(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{LeaseTTL: time.Second, ReclaimWindow: 100 * time.Millisecond})
	tasks := taskClient(t, s, servertest.GRPC)
	res, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "pill", Type: "crash",
		Options: &conveyorv1.TaskOptions{MaxRetry: 1}}))
	if err != nil {
		t.Fatal(err)
	}
	id := res.Msg.GetTask().GetId()
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"pill": 1}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	for attempt := range 2 {
		// Each attempt is dispatched, lapses (Cancel), and is never answered.
		if d := w.next(20 * time.Second).GetDispatch(); d.GetTask().GetId() != id {
			t.Fatalf("attempt %d: got %v, want the Dispatch of the task", attempt, d)
		}
		if c := w.next(20 * time.Second).GetCancel(); c.GetTaskId() != id {
			t.Fatalf("attempt %d: got %v, want the Cancel of its lapse", attempt, c)
		}
	}
	servertest.Eventually(t, 20*time.Second, "the task archived", func() bool {
		info, err := tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
		return err == nil && info.Msg.GetState() == conveyorv1.TaskState_TASK_STATE_ARCHIVED
	})
	m := scrape(t, s)
	if got := value(m, "conveyor_lease_expirations_total", "queue=pill", "type=crash"); got != 2 {
		t.Errorf("conveyor_lease_expirations_total = %v, want the 2 lapses", got)
	}
	if got := value(m, "conveyor_tasks_archived_total", "queue=pill", "type=crash"); got != 1 {
		t.Errorf("conveyor_tasks_archived_total = %v, want the task the second lapse archived", got)
	}
}
