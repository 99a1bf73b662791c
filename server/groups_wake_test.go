package server_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// groupLooks wraps the real engine and counts the times a batch session
// looked for fired groups and found none it could take (ReadyGroups
// counted none, or LeaseGroups leased none): after such a look the
// session sleeps until a signal wakes it.
type groupLooks struct {
	broker.Broker
	empty atomic.Int32
}

func (g *groupLooks) ReadyGroups(queues, types []string, counts []int) {
	g.Broker.ReadyGroups(queues, types, counts)
	for _, n := range counts {
		if n > 0 {
			return
		}
	}
	g.empty.Add(1)
}

func (g *groupLooks) LeaseGroups(ctx context.Context, p broker.GroupLeaseParams) ([]broker.GroupLease, error) {
	gls, err := g.Broker.LeaseGroups(ctx, p)
	if err == nil && len(gls) == 0 {
		g.empty.Add(1)
	}
	return gls, err
}

// startGroupLooks starts a server on the bbolt engine wrapped in a
// groupLooks, with groups that fire at 2 members.
func startGroupLooks(t *testing.T) (*servertest.Server, *groupLooks) {
	t.Helper()
	looks := &groupLooks{}
	s := startWrapped(t, server.Config{GroupPolicy: brokerGroupPolicy(2, time.Hour, time.Hour)},
		func(b broker.Broker) broker.Broker { looks.Broker = b; return looks })
	return s, looks
}

// openIdleBatcher opens a batch session on q and waits until it has
// looked for groups and found none to take, so that it sleeps.
func openIdleBatcher(t *testing.T, s *servertest.Server, looks *groupLooks) *rawWorker {
	t.Helper()
	before := looks.empty.Load()
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 4, BatchTypes: []string{"sum"}})
	if err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 10*time.Second, "the batch session found no group to take", func() bool { return looks.empty.Load() > before })
	return w
}

func requireBatch(t *testing.T, w *rawWorker, what string) {
	t.Helper()
	select {
	case m := <-w.frames:
		if bd := m.GetBatchDispatch(); bd == nil || len(bd.GetTasks()) != 2 {
			t.Fatalf("%s: got %v, want the BatchDispatch of the group's 2 members", what, m)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the fired group was not dispatched to the idle batch session", what)
	}
}

// TestFiredGroupDispatchedOnResume: a group that fired while its queue was
// paused goes to a waiting batch session when the queue is resumed.
func TestFiredGroupDispatchedOnResume(t *testing.T) {
	t.Parallel()
	s, looks := startGroupLooks(t)
	admin := adminClient(t, s)
	if _, err := admin.PauseQueue(context.Background(), connect.NewRequest(&conveyorv1.PauseQueueRequest{Queue: "q"})); err != nil {
		t.Fatal(err)
	}
	enqueueGrouped(t, taskClient(t, s, servertest.GRPC), 2) // one group: it fires by size
	w := openIdleBatcher(t, s, looks)
	if _, err := admin.ResumeQueue(context.Background(), connect.NewRequest(&conveyorv1.ResumeQueueRequest{Queue: "q"})); err != nil {
		t.Fatal(err)
	}
	requireBatch(t, w, "after ResumeQueue")
}

// TestFiredGroupDispatchedWhenMaxActiveFrees: a fired group of 2 that
// max_active holds back goes to a waiting batch session once 2 of the
// queue's ACTIVE tasks have finished (not at the first, which leaves room
// for one member only).
func TestFiredGroupDispatchedWhenMaxActiveFrees(t *testing.T) {
	t.Parallel()
	s, looks := startGroupLooks(t)
	if _, err := adminClient(t, s).UpdateQueueConfig(context.Background(), connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{
		Config: &conveyorv1.QueueConfig{Queue: "q", MaxActive: 2}})); err != nil {
		t.Fatal(err)
	}
	plain, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	tasks := taskClient(t, s, servertest.GRPC)
	for range 2 {
		if _, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "q", Type: "plain"})); err != nil {
			t.Fatal(err)
		}
	}
	running := []*conveyorv1.Dispatch{plain.next(10 * time.Second).GetDispatch(), plain.next(10 * time.Second).GetDispatch()}
	enqueueGrouped(t, taskClient(t, s, servertest.GRPC), 2) // one group: it fires by size
	w := openIdleBatcher(t, s, looks)
	for _, d := range running {
		plain.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
			TaskId: d.GetTask().GetId(), AttemptId: d.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}}})
	}
	requireBatch(t, w, "after the cap freed")
}
