package server_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestBatchDispatch: a group that fires by size is one BatchDispatch, to a
// session that advertised its type only, taking one slot; every member
// has its own attempt id; a BatchResult that leaves a member out releases
// it, and that member comes back alone as a plain Dispatch.
func TestBatchDispatch(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{GroupPolicy: brokerGroupPolicy(3, time.Hour, time.Hour)})
	tasks := taskClient(t, s, servertest.GRPC)
	plainWorker, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 5})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 3 {
		res, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "q", Type: "sum",
			Options: &conveyorv1.TaskOptions{Group: "g", Timeout: durationpb.New(10 * time.Second)}}))
		if err != nil {
			t.Fatal(err)
		}
		if st := res.Msg.GetTask().GetState(); st != conveyorv1.TaskState_TASK_STATE_AGGREGATING {
			t.Fatalf("a grouped task starts %v", st)
		}
		ids = append(ids, res.Msg.GetTask().GetId())
	}
	g, err := adminClient(t, s).ListGroups(context.Background(), connect.NewRequest(&conveyorv1.ListGroupsRequest{Queue: "q"}))
	if err != nil || len(g.Msg.GetGroups()) != 1 || g.Msg.GetGroups()[0].GetSize() != 3 || g.Msg.GetGroups()[0].GetType() != "sum" {
		t.Fatalf("ListGroups = %v, %v; want the fired group of 3 waiting (no session handles its type)", g, err)
	}
	batcher, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 1, BatchTypes: []string{"sum"}})
	if err != nil {
		t.Fatal(err)
	}
	bd := batcher.next(10 * time.Second).GetBatchDispatch()
	if bd == nil || len(bd.GetTasks()) != 3 || bd.GetGroup() != "g" {
		t.Fatalf("got %v, want one BatchDispatch of the 3 members", bd)
	}
	seen := map[string]bool{}
	for i, env := range bd.GetTasks() {
		if env.GetId() != ids[i] || env.GetAttemptId() == "" || seen[env.GetAttemptId()] {
			t.Fatalf("member %d: id %s attempt %q", i, env.GetId(), env.GetAttemptId())
		}
		seen[env.GetAttemptId()] = true
	}
	if dl := bd.GetDeadline().AsTime(); dl.After(time.Now().Add(11 * time.Second)) {
		t.Fatalf("batch deadline %v, want the members' 10s timeout", dl)
	}
	// Answer two; the third is left out: released, redelivered alone.
	var rs []*conveyorv1.Result
	for _, env := range bd.GetTasks()[:2] {
		rs = append(rs, &conveyorv1.Result{TaskId: env.GetId(), AttemptId: env.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS})
	}
	batcher.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_BatchResult{BatchResult: &conveyorv1.BatchResult{Results: rs}}})
	var d *conveyorv1.Dispatch
	select {
	case m := <-plainWorker.frames:
		d = m.GetDispatch()
	case m := <-batcher.frames:
		d = m.GetDispatch()
	case <-time.After(10 * time.Second):
		t.Fatal("the member left out was not redelivered")
	}
	if d.GetTask().GetId() != ids[2] || d.GetTask().GetRetried() != 0 {
		t.Fatalf("redelivery %v, want member %s alone with no retry counted", d, ids[2])
	}
	servertest.Eventually(t, 10*time.Second, "two completed", func() bool { return queueCounts(t, s, "q").GetCompleted() == 2 })
}
