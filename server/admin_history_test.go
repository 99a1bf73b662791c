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

// historyTotals sums a queue's history points (every queue's when empty).
func historyTotals(t *testing.T, s *servertest.Server, queue string, res conveyorv1.HistoryResolution) (enqueued, completed, failed int64, points int) {
	t.Helper()
	h, err := adminClient(t, s).GetQueueHistory(context.Background(), connect.NewRequest(&conveyorv1.GetQueueHistoryRequest{Queue: queue, Resolution: res}))
	if err != nil {
		t.Fatalf("GetQueueHistory(%q, %v): %v", queue, res, err)
	}
	for _, p := range h.Msg.GetPoints() {
		enqueued += p.GetEnqueued()
		completed += p.GetCompleted()
		failed += p.GetFailed()
	}
	return enqueued, completed, failed, len(h.Msg.GetPoints())
}

// TestQueueHistory: what a queue did shows in its history at once, of
// both resolutions, summed over queues, and after a restart.
func TestQueueHistory(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	enqueueN(t, tasks, "hist", "h", 5)
	enqueueN(t, tasks, "other", "h", 2)
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"hist": 1}, Concurrency: 2, SdkVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	w.succeed(w.nextDispatch())
	d := w.nextDispatch()
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: d.GetTask().GetId(), AttemptId: d.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY}}})
	testwait.Until(t, 10*time.Second, "two verdicts counted", func() bool { return queueCounts(t, s, "hist").GetProcessed() == 2 })

	check := func(when string) {
		t.Helper()
		for _, res := range []conveyorv1.HistoryResolution{conveyorv1.HistoryResolution_HISTORY_RESOLUTION_MINUTE, conveyorv1.HistoryResolution_HISTORY_RESOLUTION_DAY} {
			if e, c, f, n := historyTotals(t, s, "hist", res); e != 5 || c != 1 || f != 1 || n == 0 {
				t.Errorf("%s, %v history of hist: %d enqueued, %d completed, %d failed in %d points; want 5, 1, 1", when, res, e, c, f, n)
			}
			if e, _, _, _ := historyTotals(t, s, "", res); e != 7 {
				t.Errorf("%s, %v history of every queue: %d enqueued, want 7", when, res, e)
			}
		}
	}
	check("at once")
	w.close()
	s = servertest.Restart(t, s)
	check("after a restart")
}

func TestQueueHistoryRefusals(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	admin := adminClient(t, s)
	for _, c := range []struct {
		req  *conveyorv1.GetQueueHistoryRequest
		code connect.Code
	}{
		{&conveyorv1.GetQueueHistoryRequest{Queue: "never-seen"}, connect.CodeNotFound},
		{&conveyorv1.GetQueueHistoryRequest{Queue: "bad name!"}, connect.CodeInvalidArgument},
		{&conveyorv1.GetQueueHistoryRequest{Resolution: 9}, connect.CodeInvalidArgument},
	} {
		_, err := admin.GetQueueHistory(context.Background(), connect.NewRequest(c.req))
		if connect.CodeOf(err) != c.code {
			t.Errorf("GetQueueHistory(%v) = %v, want %v", c.req, err, c.code)
		}
	}
}
