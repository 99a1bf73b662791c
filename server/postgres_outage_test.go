package server_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestPostgresOutage: while the database is down, calls fail with
// unavailable, the health check says NOT_SERVING, and a worker's session
// stays up, its Result kept; once the database is back, the Result is
// applied, the session is sent the task that waited, and the server
// serves again.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	db := pgtest.NewCluster(t)
	s := servertest.Start(t, server.Config{OpenBroker: server.OpenPostgres(db.URL, "", 0)})
	tasks := taskClient(t, s, servertest.GRPC)
	health := grpchealth.NewClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC())
	ctx := context.Background()
	var ids []string
	for range 2 {
		res, err := tasks.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t"}))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, res.Msg.GetTask().GetId())
	}
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"default": 1}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	first := w.next(30 * time.Second).GetDispatch()
	if first.GetTask().GetId() != ids[0] {
		t.Fatalf("dispatched %v, want %s", first, ids[0])
	}
	status := func() grpchealth.Status {
		res, err := health.Check(ctx, &grpchealth.CheckRequest{})
		if err != nil {
			return grpchealth.StatusUnknown
		}
		return res.Status
	}

	db.Stop("immediate")
	// The Result frees the session's slot: the session tries to lease the
	// second task from a database that is down, and must not end.
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: ids[0], AttemptId: first.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}}})
	servertest.Eventually(t, 30*time.Second, "an enqueue answered unavailable", func() bool {
		_, err := tasks.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "lost"}))
		return connect.CodeOf(err) == connect.CodeUnavailable
	})
	servertest.Eventually(t, 30*time.Second, "health NOT_SERVING", func() bool { return status() == grpchealth.StatusNotServing })

	db.Start()
	second := w.next(30 * time.Second).GetDispatch()
	if second.GetTask().GetId() != ids[1] {
		t.Fatalf("after the outage the session got %v, want %s", second, ids[1])
	}
	servertest.Eventually(t, 30*time.Second, "health SERVING again", func() bool { return status() == grpchealth.StatusServing })
	got, err := tasks.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: ids[0]}))
	if err != nil || got.Msg.GetState() != conveyorv1.TaskState_TASK_STATE_COMPLETED {
		t.Fatalf("the task answered during the outage: %v, %v; want COMPLETED", got, err)
	}
	if _, err := tasks.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t"})); err != nil {
		t.Fatalf("Enqueue after the outage: %v", err)
	}
}
