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

func deleteQueue(admin conveyorv1connect.AdminServiceClient, name string) error {
	_, err := admin.DeleteQueue(context.Background(), connect.NewRequest(&conveyorv1.DeleteQueueRequest{Queue: name}))
	return err
}

// TestDeleteQueueRefusals: each refusal has its code and a message that
// says what to do, and a refused queue is kept.
func TestDeleteQueueRefusals(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	admin := conveyorv1connect.NewAdminServiceClient(servertest.HTTPClient(), s.URL()) // the Connect protocol
	ctx := context.Background()
	ids := enqueueN(t, taskClient(t, s, servertest.Connect), "busy", "t", 3)
	for i, id := range ids[:2] {
		if _, err := act(ctx, admin, []string{"archive", "cancel"}[i], id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := admin.CreateCron(ctx, connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: nightly("nightly")})); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.PauseQueue(ctx, connect.NewRequest(&conveyorv1.PauseQueueRequest{Queue: "reports"})); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		queue string
		code  connect.Code
		msg   string
	}{
		{"", connect.CodeInvalidArgument, `queue "" is invalid`},
		{"no spaces", connect.CodeInvalidArgument, `queue "no spaces" is invalid`},
		{"nowhere", connect.CodeNotFound, `queue "nowhere"`},
		{"busy", connect.CodeFailedPrecondition, `queue "busy" still holds 3 tasks (1 pending, 1 archived, 1 canceled); delete them first`},
		{"reports", connect.CodeFailedPrecondition, `cron entry "nightly"`},
	} {
		err := deleteQueue(admin, c.queue)
		if connect.CodeOf(err) != c.code || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("DeleteQueue(%q) = %v, want %s saying %q", c.queue, err, c.code, c.msg)
		}
	}
	for _, q := range []string{"busy", "reports"} {
		if queueCounts(t, s, q).GetName() != q {
			t.Errorf("the refused queue %s is no longer listed", q)
		}
	}
}

// TestDeleteQueueDropsItsMetrics: once deleted, a queue is neither listed
// nor in /metrics, and its name used again starts from zero.
func TestDeleteQueueDropsItsMetrics(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	admin := conveyorv1connect.NewAdminServiceClient(servertest.HTTPClient(), s.URL())
	ctx := context.Background()
	id := enqueueN(t, taskClient(t, s, servertest.Connect), "m", "t", 1)[0]
	w, _, err := openSession(t, s, servertest.Connect, &conveyorv1.Hello{Queues: map[string]int32{"m": 1}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := w.next(10 * time.Second).GetDispatch()
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: d.GetTask().GetId(), AttemptId: d.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}}})
	servertest.Eventually(t, 10*time.Second, "the task completed and counted", func() bool {
		return value(scrape(t, s), "conveyor_tasks_completed_total", "queue=m", "type=t") == 1
	})
	if _, err := act(ctx, admin, "delete", id); err != nil {
		t.Fatal(err)
	}
	if err := deleteQueue(admin, "m"); err != nil {
		t.Fatalf("DeleteQueue of the emptied queue: %v", err)
	}
	if q := queueCounts(t, s, "m"); q.GetName() != "" {
		t.Fatalf("ListQueues still lists the deleted queue: %v", q)
	}
	for name, f := range scrape(t, s) {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "queue" && l.GetValue() == "m" {
					t.Errorf("/metrics still exports %s%v", name, m.GetLabel())
				}
			}
		}
	}
	if err := deleteQueue(admin, "m"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("a second DeleteQueue: %v, want not_found", err)
	}
	enqueueN(t, taskClient(t, s, servertest.Connect), "m", "t", 1)
	if got := value(scrape(t, s), "conveyor_tasks_enqueued_total", "queue=m", "type=t"); got != 1 {
		t.Fatalf("the name used again counts %v enqueues, want 1", got)
	}
}
