package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func TestQueueConfig(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{GroupPolicy: brokerGroupPolicy(50, time.Minute, 0)})
	admin := adminClient(t, s)
	ctx := context.Background()
	got, err := admin.GetQueueConfig(ctx, connect.NewRequest(&conveyorv1.GetQueueConfigRequest{Queue: "fresh"}))
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Msg; c.GetQueue() != "fresh" || c.GetConcurrencyLimit() != 1 || c.GetMaxActive() != 0 ||
		c.GetGroupPolicy().GetMaxSize() != 50 || c.GetGroupPolicy().GetMaxDelay().AsDuration() != time.Minute ||
		c.GetGroupPolicy().GetGracePeriod().AsDuration() != 5*time.Second {
		t.Fatalf("defaults of a queue never configured: %v", c)
	}
	want := &conveyorv1.QueueConfig{Queue: "q", ConcurrencyLimit: 3, MaxActive: 10,
		RateLimit:   &conveyorv1.RateLimit{PerSecond: 20},
		GroupPolicy: &conveyorv1.GroupPolicy{MaxSize: 7, GracePeriod: durationpb.New(2 * time.Second)}}
	upd, err := admin.UpdateQueueConfig(ctx, connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{Config: want}))
	if err != nil {
		t.Fatal(err)
	}
	if c := upd.Msg; c.GetConcurrencyLimit() != 3 || c.GetMaxActive() != 10 || c.GetRateLimit().GetBurst() != 20 ||
		c.GetGroupPolicy().GetMaxSize() != 7 || c.GetGroupPolicy().GetMaxDelay().AsDuration() != time.Minute {
		t.Fatalf("stored config %v", c)
	}
	s = servertest.Restart(t, s)
	admin = adminClient(t, s)
	q := queueCounts(t, s, "q")
	if q.GetConfig().GetMaxActive() != 10 || q.GetConfig().GetRateLimit().GetPerSecond() != 20 {
		t.Fatalf("config after a restart, in ListQueues: %v", q.GetConfig())
	}
	// As stored: only what was set, the defaults left zero (so that a
	// read-modify-write does not pin them).
	for queue, want := range map[string]*conveyorv1.QueueConfig{
		"q":     want,
		"fresh": {Queue: "fresh", RateLimit: &conveyorv1.RateLimit{}, GroupPolicy: &conveyorv1.GroupPolicy{}},
	} {
		got, err := admin.GetQueueConfig(ctx, connect.NewRequest(&conveyorv1.GetQueueConfigRequest{Queue: queue, Stored: true}))
		if err != nil || !proto.Equal(got.Msg, want) {
			t.Errorf("GetQueueConfig(%s, stored) = %v, %v; want %v", queue, got.Msg, err, want)
		}
	}
	for _, bad := range []*conveyorv1.QueueConfig{
		{Queue: ""}, {Queue: "q", ConcurrencyLimit: -1}, {Queue: "q", MaxActive: server.MaxQueueLimit + 1},
		{Queue: "q", RateLimit: &conveyorv1.RateLimit{Burst: -2}},
		{Queue: "q", GroupPolicy: &conveyorv1.GroupPolicy{MaxSize: server.MaxGroupSize + 1}},
		{Queue: "q", GroupPolicy: &conveyorv1.GroupPolicy{MaxDelay: durationpb.New(-time.Second)}},
	} {
		if _, err := admin.UpdateQueueConfig(ctx, connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{Config: bad})); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("UpdateQueueConfig(%v): %v, want invalid_argument", bad, err)
		}
	}
}

// TestQueueCountsPersist: enqueued, processed and failed totals survive a
// restart.
func TestQueueCountsPersist(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	enqueueN(t, tasks, "q", "t", 3)
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		d := w.next(10 * time.Second).GetDispatch()
		outcome := conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS
		if i == 0 {
			outcome = conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY
		}
		w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
			TaskId: d.GetTask().GetId(), AttemptId: d.GetAttemptId(), Outcome: outcome}}})
	}
	servertest.Eventually(t, 10*time.Second, "all answered", func() bool { return queueCounts(t, s, "q").GetProcessed() == 3 })
	_ = w.stream.CloseRequest()
	s = servertest.Restart(t, s)
	if q := queueCounts(t, s, "q"); q.GetEnqueued() != 3 || q.GetProcessed() != 3 || q.GetFailed() != 1 {
		t.Fatalf("after a restart: enqueued %d processed %d failed %d, want 3, 3, 1", q.GetEnqueued(), q.GetProcessed(), q.GetFailed())
	}
}

func brokerGroupPolicy(size int32, delay, grace time.Duration) broker.GroupPolicy {
	return broker.GroupPolicy{MaxSize: size, MaxDelay: delay, GracePeriod: grace}
}

// TestQueueConfigUpdateMask: an update that names its settings changes
// only those, in one step: two clients changing different settings at
// once both keep their change; a setting that does not exist is refused.
func TestQueueConfigUpdateMask(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	admin := adminClient(t, s)
	ctx := context.Background()
	update := func(cfg *conveyorv1.QueueConfig, paths ...string) (*conveyorv1.QueueConfig, error) {
		cfg.Queue = "q"
		res, err := admin.UpdateQueueConfig(ctx, connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{
			Config: cfg, UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}}))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	}
	if _, err := update(&conveyorv1.QueueConfig{ConcurrencyLimit: 3, MaxActive: 10, RateLimit: &conveyorv1.RateLimit{PerSecond: 50, Burst: 5}}); err != nil {
		t.Fatal(err)
	}
	got, err := update(&conveyorv1.QueueConfig{MaxActive: 20}, "max_active")
	if err != nil {
		t.Fatal(err)
	}
	if got.GetConcurrencyLimit() != 3 || got.GetMaxActive() != 20 || got.GetRateLimit().GetPerSecond() != 50 || got.GetRateLimit().GetBurst() != 5 {
		t.Fatalf("after changing max_active alone: %v; want the other settings kept", got)
	}

	const rounds = 50
	errs := make(chan error, 2)
	for _, path := range []string{"max_active", "concurrency_limit"} {
		go func() {
			var err error
			for i := 1; i <= rounds && err == nil; i++ {
				_, err = update(&conveyorv1.QueueConfig{MaxActive: int32(i), ConcurrencyLimit: int32(i)}, path)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	res, err := admin.GetQueueConfig(ctx, connect.NewRequest(&conveyorv1.GetQueueConfigRequest{Queue: "q", Stored: true}))
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Msg; c.GetMaxActive() != rounds || c.GetConcurrencyLimit() != rounds || c.GetRateLimit().GetPerSecond() != 50 {
		t.Fatalf("after two clients changed one setting each: %v; want max_active and concurrency_limit %d, the rate kept", c, rounds)
	}

	_, err = update(&conveyorv1.QueueConfig{}, "max_active", "priority")
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), `update_mask.paths[1]: "priority"`) {
		t.Fatalf("a mask naming no setting: %v, want invalid_argument naming the path", err)
	}
}
