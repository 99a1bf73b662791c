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

// TestBatchesTakeTheirWeightedShare: a batch worker serves a queue of
// fired groups and a queue of single tasks, with equal weights. A
// BatchDispatch is a dispatch like any other (protocol §5.2: the weights
// govern the dispatch share across the worker's queues), so with both
// queues backlogged the singles must get about half of the slots, not
// wait until every fired group has gone.
func TestBatchesTakeTheirWeightedShare(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{GroupPolicy: brokerGroupPolicy(1, time.Hour, time.Hour)})
	tasks := taskClient(t, s, servertest.GRPC)
	const n = 10
	for range n {
		enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "batch", Type: "sum", Options: &conveyorv1.TaskOptions{Group: "g"}})
		enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "single", Type: "t"})
	}
	admin := adminClient(t, s)
	servertest.Eventually(t, 10*time.Second, "every group fired", func() bool {
		res, err := admin.ListGroups(context.Background(), connect.NewRequest(&conveyorv1.ListGroupsRequest{Queue: "batch"}))
		return err == nil && len(res.Msg.GetGroups()) == n
	})
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"batch": 1, "single": 1},
		Concurrency: 1, BatchTypes: []string{"sum"}})
	if err != nil {
		t.Fatal(err)
	}
	batches, singles := 0, 0
	for range n {
		m := w.next(10 * time.Second)
		switch {
		case m.GetBatchDispatch() != nil:
			batches++
			var rs []*conveyorv1.Result
			for _, e := range m.GetBatchDispatch().GetTasks() {
				rs = append(rs, result(e, conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS))
			}
			w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_BatchResult{BatchResult: &conveyorv1.BatchResult{Results: rs}}})
		case m.GetDispatch() != nil:
			singles++
			w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{
				Result: result(m.GetDispatch().GetTask(), conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS)}})
		default:
			t.Fatalf("unexpected frame %v", m)
		}
	}
	if batches < n/2-1 || singles < n/2-1 {
		t.Fatalf("of the first %d deliveries, %d were batches and %d single tasks; want about half each (weights 1:1)", n, batches, singles)
	}
}
