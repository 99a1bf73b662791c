package server_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/internal/testwait"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func queueStats(t *testing.T, s *servertest.Server, queue string) *conveyorv1.GetQueueStatsResponse {
	t.Helper()
	res, err := adminClient(t, s).GetQueueStats(context.Background(), connect.NewRequest(&conveyorv1.GetQueueStatsRequest{Queue: queue}))
	if err != nil {
		t.Fatalf("GetQueueStats(%q): %v", queue, err)
	}
	return res.Msg
}

// TestQueueStats: a queue's latency is the age of its oldest ready task,
// none once nothing waits; waits and runs are counted per queue and type.
func TestQueueStats(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	before := time.Now()
	enqueueN(t, tasks, "stats", "a", 2)
	enqueueN(t, tasks, "stats", "b", 1)
	st := queueStats(t, s, "stats")
	if at := st.GetOldestReadyAt().AsTime(); st.GetOldestReadyAt() == nil || at.Before(before.Add(-time.Second)) || at.After(time.Now()) {
		t.Fatalf("oldest ready at %v, want about %v", st.GetOldestReadyAt(), before)
	}
	if st.GetLatency().AsDuration() < 0 || st.GetWait().GetCount() != 0 || len(st.GetTypes()) != 0 {
		t.Fatalf("stats before any dispatch: %v", st)
	}
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"stats": 1}, Concurrency: 1, SdkVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		w.succeed(w.nextDispatch())
	}
	testwait.Until(t, 10*time.Second, "three runs observed", func() bool {
		st = queueStats(t, s, "stats")
		var runs int64
		for _, ty := range st.GetTypes() {
			runs += ty.GetRun().GetCount()
		}
		return runs == 3
	})
	if st.GetOldestReadyAt() != nil || st.GetLatency().AsDuration() != 0 {
		t.Errorf("latency with nothing ready: %v, %v", st.GetOldestReadyAt(), st.GetLatency())
	}
	if st.GetWait().GetCount() != 3 || len(st.GetTypes()) != 2 || st.GetTypes()[0].GetType() != "a" ||
		st.GetTypes()[0].GetRun().GetCount() != 2 || st.GetTypes()[1].GetRun().GetCount() != 1 {
		t.Errorf("durations: %v", st)
	}
	if p50, p95 := st.GetWait().GetP50().AsDuration(), st.GetWait().GetP95().AsDuration(); p50 <= 0 || p95 < p50 {
		t.Errorf("wait p50 %v, p95 %v", p50, p95)
	}
	if _, err := adminClient(t, s).GetQueueStats(context.Background(), connect.NewRequest(&conveyorv1.GetQueueStatsRequest{Queue: "nope"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Errorf("stats of an unknown queue: %v", err)
	}
}
