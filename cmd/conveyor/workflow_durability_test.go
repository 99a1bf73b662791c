package main

import (
	"context"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

type clients struct {
	tasks conveyorv1connect.TaskServiceClient
	admin conveyorv1connect.AdminServiceClient
}

func clientsOf(c *childServer) clients {
	return clients{
		tasks: conveyorv1connect.NewTaskServiceClient(servertest.HTTPClient(), c.url, connect.WithGRPC()),
		admin: conveyorv1connect.NewAdminServiceClient(servertest.HTTPClient(), c.url, connect.WithGRPC()),
	}
}

func (c clients) enqueue(t *testing.T, req *conveyorv1.EnqueueRequest) *conveyorv1.TaskInfo {
	t.Helper()
	res, err := c.tasks.Enqueue(context.Background(), connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	return res.Msg.GetTask()
}

func (c clients) pending(t *testing.T, queue string) int64 {
	t.Helper()
	res, err := c.admin.ListQueues(context.Background(), connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range res.Msg.GetQueues() {
		if q.GetName() == queue {
			return q.GetPending()
		}
	}
	return 0
}

// fireTimes returns the scheduled times of the cron tasks in queue.
func (c clients) fireTimes(t *testing.T, queue string) []time.Time {
	t.Helper()
	page, err := c.admin.ListTasks(context.Background(), connect.NewRequest(&conveyorv1.ListTasksRequest{Queue: queue, PageSize: 1000}))
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Time
	for _, brief := range page.Msg.GetTasks() {
		task, err := c.tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: brief.GetId()}))
		if err != nil {
			t.Fatal(err)
		}
		at, err := time.Parse(time.RFC3339, task.Msg.GetMetadata()[server.CronFireKey])
		if err != nil {
			t.Fatalf("cron task %s: %v", brief.GetId(), err)
		}
		out = append(out, at)
	}
	return out
}

// TestWorkflowStateSurvivesSIGKILL builds every kind of workflow state
// (queue configuration, a held unique key, a blocked dependent, an
// aggregating group, a firing cron entry), kills the server with SIGKILL,
// keeps it down for a few seconds and restarts it: all of it is there,
// and the cron entry neither fired a second twice nor replayed the
// seconds it was down.
func TestWorkflowStateSurvivesSIGKILL(t *testing.T) {
	ctx := context.Background()
	dataDir := t.TempDir()
	child := startChild(t, dataDir)
	c := clientsOf(child)

	config := &conveyorv1.QueueConfig{Queue: "wf", ConcurrencyLimit: 2, MaxActive: 5,
		RateLimit:   &conveyorv1.RateLimit{PerSecond: 10, Burst: 20},
		GroupPolicy: &conveyorv1.GroupPolicy{MaxSize: 50, MaxDelay: durationpb.New(time.Hour), GracePeriod: durationpb.New(time.Hour)},
		// No URL (nothing to push to here), but its other settings stored.
		Push: &conveyorv1.PushEndpoint{Concurrency: 7, Timeout: durationpb.New(45 * time.Second)}}
	if _, err := c.admin.UpdateQueueConfig(ctx, connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{Config: config})); err != nil {
		t.Fatal(err)
	}
	c.enqueue(t, &conveyorv1.EnqueueRequest{Queue: "wf", Type: "once", Options: &conveyorv1.TaskOptions{UniqueKey: "only-one"}})
	parent := c.enqueue(t, &conveyorv1.EnqueueRequest{Queue: "wf", Type: "parent"})
	dependent := c.enqueue(t, &conveyorv1.EnqueueRequest{Queue: "wf", Type: "child", Options: &conveyorv1.TaskOptions{
		DependsOn: []*conveyorv1.TaskDependency{{TaskId: parent.GetId()}}}})
	for range 3 {
		c.enqueue(t, &conveyorv1.EnqueueRequest{Queue: "wf", Type: "sum", Options: &conveyorv1.TaskOptions{Group: "g"}})
	}
	if _, err := c.admin.CreateCron(ctx, connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: &conveyorv1.CronEntry{
		Id: "tick", Spec: "@every 1s", Queue: "ticks", Type: "tick"}})); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 20*time.Second, "two cron fires", func() bool { return c.pending(t, "ticks") >= 2 })

	if err := child.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.cmd.Wait()
	killed := time.Now()
	// The downtime is the scenario: the seconds it spans must not be
	// fired after the restart.
	time.Sleep(time.Until(killed.Add(2500 * time.Millisecond)))
	down := time.Now()
	child = startChild(t, dataDir)
	c = clientsOf(child)

	got, err := c.admin.GetQueueConfig(ctx, connect.NewRequest(&conveyorv1.GetQueueConfigRequest{Queue: "wf"}))
	if err != nil || !proto.Equal(got.Msg, config) {
		t.Fatalf("queue configuration after SIGKILL = %v, %v; want %v", got, err, config)
	}
	_, err = c.tasks.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "wf", Type: "once",
		Options: &conveyorv1.TaskOptions{UniqueKey: "only-one"}}))
	if connect.CodeOf(err) != connect.CodeAlreadyExists {
		t.Fatalf("the unique key after SIGKILL: %v, want already_exists", err)
	}
	dep, err := c.tasks.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: dependent.GetId()}))
	if err != nil || dep.Msg.GetState() != conveyorv1.TaskState_TASK_STATE_BLOCKED || len(dep.Msg.GetDependsOn()) != 1 ||
		dep.Msg.GetDependsOn()[0].GetState() != conveyorv1.TaskState_TASK_STATE_PENDING {
		t.Fatalf("the dependent after SIGKILL = %v, %v; want BLOCKED on its PENDING parent", dep, err)
	}
	groups, err := c.admin.ListGroups(ctx, connect.NewRequest(&conveyorv1.ListGroupsRequest{Queue: "wf"}))
	if err != nil || len(groups.Msg.GetGroups()) != 1 || groups.Msg.GetGroups()[0].GetSize() != 3 {
		t.Fatalf("the group after SIGKILL = %v, %v; want g with its 3 members", groups, err)
	}

	before := c.pending(t, "ticks")
	servertest.Eventually(t, 20*time.Second, "two cron fires after the restart", func() bool { return c.pending(t, "ticks") >= before+2 })
	seen := map[time.Time]bool{}
	for _, at := range c.fireTimes(t, "ticks") {
		if seen[at] {
			t.Fatalf("second %s was fired twice", at)
		}
		seen[at] = true
		// A fire is applied at its time or after, so one scheduled after
		// the kill was applied by the restarted server: a replay.
		if at.After(killed) && at.Before(down) {
			t.Fatalf("second %s, while the server was down (%s to %s), was replayed", at, killed, down)
		}
	}
}
