package server_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// boundWait bounds how long a test waits for a producer to begin waiting,
// or to be released: well within MaxRoomWait, generous on a slow machine.
const boundWait = 4 * time.Second

// refusalDeadline is the deadline of a call expected to be refused after
// its wait for room (a quarter of it): the three quarters left for the
// refusal to come back are ample on a loaded machine, so a refusal is
// never taken for the deadline.
const refusalDeadline = 8 * time.Second

// setMaxWaiting bounds queue at n waiting tasks, leaving the rest of its
// configuration alone.
func setMaxWaiting(t testing.TB, admin conveyorv1connect.AdminServiceClient, queue string, n int64) {
	t.Helper()
	_, err := admin.UpdateQueueConfig(context.Background(), connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{
		Config:     &conveyorv1.QueueConfig{Queue: queue, MaxWaiting: n},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"max_waiting"}},
	}))
	if err != nil {
		t.Fatalf("UpdateQueueConfig max_waiting %d: %v", n, err)
	}
}

// inQueue is an EnqueueRequest for queue.
func inQueue(queue string) *conveyorv1.EnqueueRequest {
	return &conveyorv1.EnqueueRequest{Queue: queue, Type: "t", Payload: []byte(`{}`)}
}

// requireFullMessage fails unless msg is a full queue's refusal naming
// queue and its bound.
func requireFullMessage(t *testing.T, what, msg, queue string, max int64) {
	t.Helper()
	for _, want := range []string{"queue full", `"` + queue + `"`, "max_waiting of " + strconv.FormatInt(max, 10), "for room"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("%s: message %q does not say %q", what, msg, want)
		}
	}
}

// waitForRoomWaiter waits until a producer waits for room in queue.
func waitForRoomWaiter(t *testing.T, s *servertest.Server, queue string) {
	t.Helper()
	servertest.Eventually(t, boundWait, "a producer waits for room in "+queue, func() bool { return s.RoomWaiters(queue) > 0 })
}

// TestBoundedQueueProducerReleasedByWorker: a producer blocked on a full
// queue is released as soon as a worker takes a task, and its task stored.
func TestBoundedQueueProducerReleasedByWorker(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks, admin := taskClient(t, s, servertest.GRPC), adminClient(t, s)
	setMaxWaiting(t, admin, "b", 1)
	if _, err := tasks.Enqueue(t.Context(), connect.NewRequest(inQueue("b"))); err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		info *conveyorv1.TaskInfo
		err  error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := tasks.Enqueue(context.Background(), connect.NewRequest(inQueue("b")))
		if err != nil {
			done <- outcome{err: err}
			return
		}
		done <- outcome{info: res.Msg.GetTask()}
	}()
	waitForRoomWaiter(t, s, "b")
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"b": 1}, Concurrency: 1, SdkVersion: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if d := w.next(boundWait).GetDispatch(); d == nil {
		t.Fatal("the worker got no Dispatch")
	}
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatalf("the producer waiting for room failed: %v", o.err)
		}
		if o.info.GetState() != conveyorv1.TaskState_TASK_STATE_PENDING {
			t.Fatalf("the producer's task is %s, want PENDING", o.info.GetState())
		}
	case <-time.After(boundWait):
		t.Fatal("the producer was not released once the worker took a task")
	}
	if n := s.RoomWaiters("b"); n != 0 {
		t.Fatalf("%d producers still registered as waiting", n)
	}
}

// TestBoundedQueueRefusedAfterItsShare: a producer that finds no room
// within a quarter of its deadline gets resource_exhausted naming the
// queue and its bound, before its deadline, and the refusal is counted.
// The wire formats wait side by side.
func TestBoundedQueueRefusedAfterItsShare(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	admin := adminClient(t, s)
	setMaxWaiting(t, admin, "b", 1)
	if _, err := taskClient(t, s, servertest.GRPC).Enqueue(t.Context(), connect.NewRequest(inQueue("b"))); err != nil {
		t.Fatal(err)
	}
	t.Run("protocols", func(t *testing.T) {
		for _, p := range servertest.Protocols {
			t.Run(string(p), func(t *testing.T) {
				t.Parallel()
				tasks := taskClient(t, s, p)
				ctx, cancel := context.WithTimeout(t.Context(), refusalDeadline)
				_, err := tasks.Enqueue(ctx, connect.NewRequest(inQueue("b")))
				ctxErr := ctx.Err()
				cancel()
				if connect.CodeOf(err) != connect.CodeResourceExhausted || ctxErr != nil {
					t.Fatalf("Enqueue into a full queue = %v (its context: %v), want resource_exhausted within its deadline", err, ctxErr)
				}
				var ce *connect.Error
				if !errors.As(err, &ce) {
					t.Fatalf("%v is not a connect error", err)
				}
				requireFullMessage(t, string(p), ce.Message(), "b", 1)
			})
		}
	})
	got := value(scrape(t, s), "conveyor_enqueue_rejected_total", "queue=b", "reason=full")
	if want := float64(len(servertest.Protocols)); got != want {
		t.Fatalf("conveyor_enqueue_rejected_total{queue=b,reason=full} = %v, want %v", got, want)
	}
}

// TestBoundedQueueBatchMixed: the items of an EnqueueBatch are admitted
// while there is room and refused on their own after the call's one wait,
// each with its own code.
func TestBoundedQueueBatchMixed(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks, admin := taskClient(t, s, servertest.GRPC), adminClient(t, s)
	setMaxWaiting(t, admin, "b", 2)
	if _, err := tasks.Enqueue(t.Context(), connect.NewRequest(inQueue("b"))); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), refusalDeadline)
	defer cancel()
	res, err := tasks.EnqueueBatch(ctx, connect.NewRequest(&conveyorv1.EnqueueBatchRequest{Items: []*conveyorv1.EnqueueRequest{
		inQueue("b"), inQueue("b"), inQueue("other"), inQueue("b"), {Queue: "b"},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"", "resource_exhausted", "", "resource_exhausted", "invalid_argument"}
	for i, r := range res.Msg.GetResults() {
		if r.GetCode() != want[i] || (want[i] == "") != (r.GetTask() != nil) {
			t.Fatalf("results[%d] = code %q, task %v, error %q; want code %q", i, r.GetCode(), r.GetTask() != nil, r.GetError(), want[i])
		}
		if want[i] == "resource_exhausted" {
			requireFullMessage(t, "a refused item", r.GetError(), "b", 2)
		}
	}
	if got := value(scrape(t, s), "conveyor_enqueue_rejected_total", "queue=b", "reason=full"); got != 2 {
		t.Fatalf("conveyor_enqueue_rejected_total{queue=b} = %v, want 2 (the refused items)", got)
	}
}

// TestBoundedQueueBatchStoredAsRoomComes: a waiting EnqueueBatch stores
// its items as room appears, one wait for the whole call.
func TestBoundedQueueBatchStoredAsRoomComes(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks, admin := taskClient(t, s, servertest.GRPC), adminClient(t, s)
	setMaxWaiting(t, admin, "b", 1)
	first, err := tasks.Enqueue(t.Context(), connect.NewRequest(inQueue("b")))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan *conveyorv1.EnqueueBatchResponse, 1)
	go func() {
		res, err := tasks.EnqueueBatch(context.Background(), connect.NewRequest(&conveyorv1.EnqueueBatchRequest{
			Items: []*conveyorv1.EnqueueRequest{inQueue("b"), inQueue("b")}}))
		if err != nil {
			t.Error(err)
		}
		done <- res.Msg
	}()
	waitForRoomWaiter(t, s, "b")
	cancelTask(t, admin, first.Msg.GetTask().GetId())
	// One item fits: it is stored, and the other waits on.
	var stored string
	servertest.Eventually(t, boundWait, "one item of the batch stored", func() bool {
		ids := pendingIDs(t, admin, "b")
		if len(ids) == 1 {
			stored = ids[0]
		}
		return stored != ""
	})
	cancelTask(t, admin, stored)
	select {
	case res := <-done:
		for i, r := range res.GetResults() {
			if r.GetError() != "" {
				t.Fatalf("results[%d]: %s: there was room for it within the wait", i, r.GetError())
			}
		}
	case <-time.After(boundWait):
		t.Fatal("the batch did not return once room came for both items")
	}
}

// TestBoundedQueueTxWhole: an EnqueueTx is refused whole, nothing
// stored; a waiting one is tried again only once its tasks can all fit.
func TestBoundedQueueTxWhole(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks, admin := taskClient(t, s, servertest.GRPC), adminClient(t, s)
	setMaxWaiting(t, admin, "b", 2)
	first, err := tasks.Enqueue(t.Context(), connect.NewRequest(inQueue("b")))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), refusalDeadline)
	defer cancel()
	_, err = tasks.EnqueueTx(ctx, connect.NewRequest(&conveyorv1.EnqueueTxRequest{Items: []*conveyorv1.EnqueueRequest{inQueue("other"), inQueue("b"), inQueue("b")}}))
	var ce *connect.Error
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !errors.As(err, &ce) {
		t.Fatalf("EnqueueTx past the bound = %v, want resource_exhausted", err)
	}
	requireFullMessage(t, "EnqueueTx", ce.Message(), "b", 2)
	if q := queueCounts(t, s, "other"); q.GetPending() != 0 {
		t.Fatalf("a refused EnqueueTx stored %d tasks in another queue", q.GetPending())
	}
	if got := value(scrape(t, s), "conveyor_enqueue_rejected_total", "queue=b", "reason=full"); got != 2 {
		t.Fatalf("conveyor_enqueue_rejected_total{queue=b} = %v, want 2 (the call's tasks for b)", got)
	}

	second, err := tasks.Enqueue(t.Context(), connect.NewRequest(inQueue("b")))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := tasks.EnqueueTx(context.Background(), connect.NewRequest(&conveyorv1.EnqueueTxRequest{Items: []*conveyorv1.EnqueueRequest{inQueue("b"), inQueue("b")}}))
		done <- err
	}()
	waitForRoomWaiter(t, s, "b")
	cancelTask(t, admin, first.Msg.GetTask().GetId()) // room for one: not enough
	cancelTask(t, admin, second.Msg.GetTask().GetId())
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("EnqueueTx once room came for all its tasks: %v", err)
		}
	case <-time.After(boundWait):
		t.Fatal("the EnqueueTx did not return once room came")
	}
	if q := queueCounts(t, s, "b"); q.GetPending() != 2 {
		t.Fatalf("queue b holds %d pending, want the transaction's 2", q.GetPending())
	}
}

// TestBoundedQueueCronFireRecorded: a cron fire that finds its queue full
// enqueues nothing, and the entry says why.
func TestBoundedQueueCronFireRecorded(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks, admin := taskClient(t, s, servertest.GRPC), adminClient(t, s)
	setMaxWaiting(t, admin, "b", 1)
	if _, err := tasks.Enqueue(t.Context(), connect.NewRequest(inQueue("b"))); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateCron(t.Context(), connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: &conveyorv1.CronEntry{
		Id: "tick", Spec: "@every 1s", Queue: "b", Type: "tick"}})); err != nil {
		t.Fatal(err)
	}
	var entry *conveyorv1.CronEntry
	servertest.Eventually(t, 10*time.Second, "a fire into the full queue recorded", func() bool {
		res, err := admin.GetCron(t.Context(), connect.NewRequest(&conveyorv1.GetCronRequest{Id: "tick"}))
		if err != nil {
			t.Fatal(err)
		}
		entry = res.Msg
		return entry.GetLastRunAt() != nil
	})
	if entry.GetLastTaskId() != "" || !strings.Contains(entry.GetLastError(), "queue full") {
		t.Fatalf("the fire into a full queue is recorded as %v; want no task and last_error saying the queue was full", entry)
	}
	if q := queueCounts(t, s, "b"); q.GetPending() != 1 {
		t.Fatalf("queue b holds %d pending after the refused fire, want 1", q.GetPending())
	}
	// The scheduler counts a fire once the store has recorded it: the
	// counters may lag the entry a moment.
	servertest.Eventually(t, 10*time.Second, "the refused fire counted", func() bool {
		families := scrape(t, s)
		return value(families, "conveyor_cron_fires_total", "cron=tick", "result=refused") >= 1 &&
			value(families, "conveyor_enqueue_rejected_total", "queue=b", "reason=full") >= 1
	})
}

// TestQueueConfigMaxWaiting: max_waiting is validated, set alone by its
// mask path, shown in QueueInfo, and kept across a restart.
func TestQueueConfigMaxWaiting(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	admin := adminClient(t, s)
	for _, n := range []int64{-1, server.MaxQueueWaiting + 1} {
		_, err := admin.UpdateQueueConfig(t.Context(), connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{
			Config: &conveyorv1.QueueConfig{Queue: "b", MaxWaiting: n}}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "config.max_waiting") {
			t.Fatalf("max_waiting %d: %v, want invalid_argument naming config.max_waiting", n, err)
		}
	}
	if _, err := admin.UpdateQueueConfig(t.Context(), connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{
		Config: &conveyorv1.QueueConfig{Queue: "b", MaxActive: 3}})); err != nil {
		t.Fatal(err)
	}
	setMaxWaiting(t, admin, "b", 500)
	s = servertest.Restart(t, s)
	if c := queueCounts(t, s, "b").GetConfig(); c.GetMaxWaiting() != 500 || c.GetMaxActive() != 3 {
		t.Fatalf("after a restart the config is %v, want max_waiting 500 and max_active 3", c)
	}
}

func cancelTask(t *testing.T, admin conveyorv1connect.AdminServiceClient, id string) {
	t.Helper()
	if _, err := admin.CancelTask(t.Context(), connect.NewRequest(&conveyorv1.CancelTaskRequest{Id: id})); err != nil {
		t.Fatalf("CancelTask %s: %v", id, err)
	}
}

// pendingIDs lists the PENDING tasks of queue.
func pendingIDs(t *testing.T, admin conveyorv1connect.AdminServiceClient, queue string) []string {
	t.Helper()
	res, err := admin.ListTasks(t.Context(), connect.NewRequest(&conveyorv1.ListTasksRequest{Queue: queue,
		State: conveyorv1.TaskState_TASK_STATE_PENDING}))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, task := range res.Msg.GetTasks() {
		ids = append(ids, task.GetId())
	}
	return ids
}

// TestBoundedQueueWaitEndsAtShutdown: a producer waiting for room does not
// hold a shutdown up: it is refused at once.
func TestBoundedQueueWaitEndsAtShutdown(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks, admin := taskClient(t, s, servertest.GRPC), adminClient(t, s)
	setMaxWaiting(t, admin, "b", 1)
	if _, err := tasks.Enqueue(t.Context(), connect.NewRequest(inQueue("b"))); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := tasks.Enqueue(context.Background(), connect.NewRequest(inQueue("b")))
		done <- err
	}()
	waitForRoomWaiter(t, s, "b")
	start := time.Now()
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	// The wait would last 5 s (the call has no deadline).
	if took := time.Since(start); took > 4*time.Second {
		t.Fatalf("Stop took %s with a producer waiting for room", took)
	}
	if err := <-done; connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("the waiting producer got %v, want resource_exhausted", err)
	}
}
