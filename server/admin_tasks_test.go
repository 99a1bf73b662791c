package server_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/oklog/ulid/v2"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func adminIn(t *testing.T, s *servertest.Server, p servertest.Protocol) conveyorv1connect.AdminServiceClient {
	t.Helper()
	hc := servertest.HTTPClient()
	return conveyorv1connect.NewAdminServiceClient(hc, s.URL(), p.ClientOption())
}

func enqueueN(t *testing.T, tasks conveyorv1connect.TaskServiceClient, queue, typ string, n int) []string {
	t.Helper()
	var ids []string
	for n > 0 {
		batch := min(n, 1000)
		items := make([]*conveyorv1.EnqueueRequest, batch)
		for i := range items {
			items[i] = &conveyorv1.EnqueueRequest{Queue: queue, Type: typ, Payload: []byte(fmt.Sprintf(`{"n":%d}`, len(ids)+i))}
		}
		res, err := tasks.EnqueueBatch(context.Background(), connect.NewRequest(&conveyorv1.EnqueueBatchRequest{Items: items, Brief: true}))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res.Msg.GetResults() {
			if r.GetError() != "" {
				t.Fatal(r.GetError())
			}
			ids = append(ids, r.GetTask().GetId())
		}
		n -= batch
	}
	return ids
}

// TestListTasksPagesUnderConcurrentEnqueues pages through a queue while
// another producer keeps enqueuing into it: no task is returned twice, and
// every task present from the start is returned. In every wire format.
func TestListTasksPagesUnderConcurrentEnqueues(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	present := enqueueN(t, tasks, "q", "t", 250)
	for _, p := range servertest.Protocols {
		t.Run(string(p), func(t *testing.T) {
			admin := adminIn(t, s, p)
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "q", Type: "t"})); err != nil {
						return
					}
				}
			}()
			seen := map[string]bool{}
			req := &conveyorv1.ListTasksRequest{Queue: "q", State: conveyorv1.TaskState_TASK_STATE_PENDING, PageSize: 37}
			for {
				res, err := admin.ListTasks(context.Background(), connect.NewRequest(req))
				if err != nil {
					t.Fatal(err)
				}
				for _, task := range res.Msg.GetTasks() {
					if seen[task.GetId()] {
						t.Fatalf("task %s returned twice", task.GetId())
					}
					seen[task.GetId()] = true
				}
				if res.Msg.GetNextPageToken() == "" {
					break
				}
				req.PageToken = res.Msg.GetNextPageToken()
			}
			close(stop)
			<-done
			for _, id := range present {
				if !seen[id] {
					t.Fatalf("task %s, present throughout, was skipped", id)
				}
			}
		})
	}
}

func TestListTasksFiltersAndErrors(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	emails := enqueueN(t, tasks, "q", "email", 3)
	enqueueN(t, tasks, "q", "sms", 2)
	res, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "q", Type: "sms",
		Metadata: map[string]string{"tenant": "acme-corp"}}))
	if err != nil {
		t.Fatal(err)
	}
	acme := res.Msg.GetTask().GetId()
	admin := adminClient(t, s)
	list := func(req *conveyorv1.ListTasksRequest) []string {
		t.Helper()
		res, err := admin.ListTasks(context.Background(), connect.NewRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, task := range res.Msg.GetTasks() {
			ids = append(ids, task.GetId())
		}
		return ids
	}
	if got := list(&conveyorv1.ListTasksRequest{Queue: "q", Type: "email"}); len(got) != 3 || got[0] != emails[0] {
		t.Fatalf("type filter: %v, want the 3 emails", got)
	}
	if got := list(&conveyorv1.ListTasksRequest{Queue: "q", Search: "acme"}); len(got) != 1 || got[0] != acme {
		t.Fatalf("search: %v, want %s", got, acme)
	}
	if got := list(&conveyorv1.ListTasksRequest{Queue: "q", State: conveyorv1.TaskState_TASK_STATE_COMPLETED}); len(got) != 0 {
		t.Fatalf("no completed task, listed %v", got)
	}
	var daily []string
	for _, g := range []string{"daily", "weekly", "daily"} {
		res, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "q", Type: "digest",
			Options: &conveyorv1.TaskOptions{Group: g}}))
		if err != nil {
			t.Fatal(err)
		}
		if g == "daily" {
			daily = append(daily, res.Msg.GetTask().GetId())
		}
	}
	if got := list(&conveyorv1.ListTasksRequest{Queue: "q", Group: "daily"}); !slices.Equal(got, daily) {
		t.Fatalf("group filter: %v, want the daily group's %v", got, daily)
	}
	for _, bad := range []*conveyorv1.ListTasksRequest{
		{Queue: ""}, {Queue: "a b"}, {Queue: "q", State: 42}, {Queue: "q", PageSize: 1001}, {Queue: "q", PageSize: -1},
		{Queue: "q", PageToken: "garbage!"}, {Queue: "q", Search: strings.Repeat("x", server.MaxSearchBytes+1)},
		{Queue: "q", Group: strings.Repeat("g", server.MaxNameBytes+1)},
	} {
		_, err := admin.ListTasks(context.Background(), connect.NewRequest(bad))
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("ListTasks(%v): %v, want invalid_argument", bad, err)
		}
	}
}

// TestTaskActions covers each single action and its batch form end to end.
func TestTaskActions(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	admin := adminClient(t, s)
	ctx := context.Background()
	ids := enqueueN(t, tasks, "q", "t", 4)

	got, err := admin.CancelTask(ctx, connect.NewRequest(&conveyorv1.CancelTaskRequest{Id: ids[0]}))
	if err != nil || got.Msg.GetState() != conveyorv1.TaskState_TASK_STATE_CANCELED {
		t.Fatalf("CancelTask: %v %v", got, err)
	}
	got, err = admin.RunTask(ctx, connect.NewRequest(&conveyorv1.RunTaskRequest{Id: ids[0]}))
	if err != nil || got.Msg.GetState() != conveyorv1.TaskState_TASK_STATE_PENDING {
		t.Fatalf("RunTask of a canceled task: %v %v", got, err)
	}
	got, err = admin.ArchiveTask(ctx, connect.NewRequest(&conveyorv1.ArchiveTaskRequest{Id: ids[1]}))
	if err != nil || got.Msg.GetState() != conveyorv1.TaskState_TASK_STATE_ARCHIVED || got.Msg.GetLastError() == "" {
		t.Fatalf("ArchiveTask: %v %v", got, err)
	}
	if _, err := admin.DeleteTask(ctx, connect.NewRequest(&conveyorv1.DeleteTaskRequest{Id: ids[2]})); err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: ids[2]})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("GetTask of a deleted task: %v", err)
	}
	// Errors: a terminal task cannot be canceled; an unknown one is not found.
	if _, err := admin.CancelTask(ctx, connect.NewRequest(&conveyorv1.CancelTaskRequest{Id: ids[1]})); connect.CodeOf(err) != connect.CodeFailedPrecondition {
		t.Fatalf("CancelTask of an archived task: %v, want failed_precondition", err)
	}
	if _, err := admin.RunTask(ctx, connect.NewRequest(&conveyorv1.RunTaskRequest{Id: "01J00000000000000000000000"})); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("RunTask of an unknown task: %v, want not_found", err)
	}
	if _, err := admin.ArchiveTask(ctx, connect.NewRequest(&conveyorv1.ArchiveTaskRequest{})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("ArchiveTask with no id: %v, want invalid_argument", err)
	}

	batch, err := admin.BatchArchiveTasks(ctx, connect.NewRequest(&conveyorv1.BatchArchiveTasksRequest{Ids: []string{ids[3], ids[2], ids[1]}}))
	if err != nil {
		t.Fatal(err)
	}
	r := batch.Msg.GetResults()
	if len(r) != 3 || r[0].GetId() != ids[3] || r[0].GetError() != "" || !strings.Contains(r[1].GetError(), "not found") || r[2].GetError() == "" {
		t.Fatalf("per-id results %v", r)
	}
	if r[0].GetCode() != "" || r[1].GetCode() != "not_found" || r[2].GetCode() != connect.CodeFailedPrecondition.String() {
		t.Errorf("per-id codes %q, %q, %q; want none, not_found, failed_precondition", r[0].GetCode(), r[1].GetCode(), r[2].GetCode())
	}
	if _, err := admin.BatchRunTasks(ctx, connect.NewRequest(&conveyorv1.BatchRunTasksRequest{})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("BatchRunTasks of no ids: %v", err)
	}
	if q := queueCounts(t, s, "q"); q.GetArchived() != 2 || q.GetPending() != 1 {
		t.Fatalf("counts after the actions: %v", q)
	}
}

// TestCancelRunningTask: canceling an ACTIVE task sends Cancel to its
// worker; the worker's eventual Result decides (a failure archives it,
// saying it was canceled).
func TestCancelRunningTask(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	id := enqueueN(t, tasks, "q", "t", 1)[0]
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := w.next(10 * time.Second).GetDispatch()
	got, err := adminClient(t, s).CancelTask(context.Background(), connect.NewRequest(&conveyorv1.CancelTaskRequest{Id: id}))
	if err != nil || got.Msg.GetState() != conveyorv1.TaskState_TASK_STATE_ACTIVE {
		t.Fatalf("CancelTask of a running task: %v %v, want it still ACTIVE", got, err)
	}
	if c := w.next(10 * time.Second).GetCancel(); c.GetTaskId() != id {
		t.Fatalf("want a Cancel for %s, got %v", id, c)
	}
	w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
		TaskId: id, AttemptId: d.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY, ErrorMsg: "context canceled"}}})
	servertest.Eventually(t, 10*time.Second, "archived as canceled", func() bool {
		got, err := tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
		return err == nil && got.Msg.GetState() == conveyorv1.TaskState_TASK_STATE_ARCHIVED &&
			strings.HasPrefix(got.Msg.GetLastError(), "canceled by an operator")
	})
}

// TestBulkTasks archives a whole state of a queue, streaming progress per
// chunk, while a worker keeps draining another queue.
func TestBulkTasks(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	enqueueN(t, tasks, "bulk", "t", 1200)
	enqueueN(t, tasks, "bulk", "other", 30)
	admin := adminClient(t, s)
	msgs := runBulk(t, admin, &conveyorv1.BulkTasksRequest{
		Action: conveyorv1.TaskAction_TASK_ACTION_ARCHIVE, Queue: "bulk", State: conveyorv1.TaskState_TASK_STATE_PENDING, Type: "t"}, nil)
	last := msgs[len(msgs)-1]
	if first := msgs[0]; first.GetTotal() != 1230 {
		t.Fatalf("first progress %v, want the estimate of 1230 (the state's count, the type filter aside)", first)
	}
	if len(msgs) < 3 || !last.GetDone() || last.GetSucceeded() != 1200 || last.GetFailed() != 0 || last.GetTotal() != 1200 {
		t.Fatalf("%d progress messages, last %v; want several, ending done with 1200 archived of the 1200 met", len(msgs), last)
	}
	if q := queueCounts(t, s, "bulk"); q.GetArchived() != 1200 || q.GetPending() != 30 {
		t.Fatalf("after the bulk archive: %v", q)
	}
	for _, g := range []string{"a", "b", "a"} {
		if _, err := tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "bulk", Type: "digest",
			Options: &conveyorv1.TaskOptions{Group: g}})); err != nil {
			t.Fatal(err)
		}
	}
	msgs = runBulk(t, admin, &conveyorv1.BulkTasksRequest{
		Action: conveyorv1.TaskAction_TASK_ACTION_CANCEL, Queue: "bulk", State: conveyorv1.TaskState_TASK_STATE_AGGREGATING, Group: "a"}, nil)
	if last := msgs[len(msgs)-1]; !last.GetDone() || last.GetSucceeded() != 2 || last.GetFailed() != 0 {
		t.Fatalf("bulk cancel of group a: last progress %v; want done with its 2 tasks canceled", last)
	}
	if q := queueCounts(t, s, "bulk"); q.GetCanceled() != 2 || q.GetAggregating() != 1 {
		t.Fatalf("after the bulk cancel of one group: %v; want 2 canceled, group b's task still aggregating", q)
	}
	for _, bad := range []*conveyorv1.BulkTasksRequest{
		{Queue: "bulk", State: conveyorv1.TaskState_TASK_STATE_PENDING},
		{Action: conveyorv1.TaskAction_TASK_ACTION_RUN, Queue: "bulk"},
		{Action: conveyorv1.TaskAction_TASK_ACTION_RUN, State: conveyorv1.TaskState_TASK_STATE_ARCHIVED},
	} {
		if err := bulkRefusal(t, admin, bad); connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("BulkTasks(%v): %v, want invalid_argument", bad, err)
		}
	}
	// An action its state never takes is refused before any task is met
	// (without the check, every pending task failed on its own).
	err := bulkRefusal(t, admin, &conveyorv1.BulkTasksRequest{
		Action: conveyorv1.TaskAction_TASK_ACTION_RUN, Queue: "bulk", State: conveyorv1.TaskState_TASK_STATE_PENDING})
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || !strings.Contains(err.Error(), "run does not apply to pending tasks") {
		t.Errorf("bulk run of pending tasks: %v, want failed_precondition naming the action and the state", err)
	}
}

// bulkRefusal is the error of a BulkTasks call the server should refuse
// before acting; progress sent first fails the test.
func bulkRefusal(t *testing.T, admin conveyorv1connect.AdminServiceClient, req *conveyorv1.BulkTasksRequest) error {
	t.Helper()
	stream, err := admin.BulkTasks(context.Background(), connect.NewRequest(req))
	if err != nil {
		return err
	}
	for stream.Receive() {
		t.Errorf("BulkTasks(%v) sent progress %v before its error", req, stream.Msg())
	}
	return stream.Err()
}

// TestBulkTasksOnAHundredThousand archives 100,000 pending tasks, then runs
// them all again, with BulkTasks, while a worker keeps taking tasks of
// another queue: every task is acted on once, progress only grows and
// ends done, and the other queue's dispatch goes on meanwhile.
func TestBulkTasksOnAHundredThousand(t *testing.T) {
	t.Parallel()
	const n = 100_000
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	enqueueN(t, tasks, "mass", "t", n)
	enqueueN(t, tasks, "live", "t", 2000)
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"live": 1}, Concurrency: 4})
	if err != nil {
		t.Fatal(err)
	}
	var answered atomic.Int64
	stop := make(chan struct{})
	go func() { // a worker answering SUCCESS as fast as it is sent tasks
		for {
			select {
			case <-stop:
				return
			case m, ok := <-w.frames:
				if !ok {
					return
				}
				if d := m.GetDispatch(); d != nil {
					_ = w.stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
						TaskId: d.GetTask().GetId(), AttemptId: d.GetAttemptId(), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS}}})
					answered.Add(1)
				}
			}
		}
	}()
	defer close(stop)
	admin := adminClient(t, s)
	bulk := func(action conveyorv1.TaskAction, from conveyorv1.TaskState) (done int64) {
		t.Helper()
		before := answered.Load()
		msgs := runBulk(t, admin, &conveyorv1.BulkTasksRequest{Action: action, Queue: "mass", State: from}, nil)
		last := msgs[len(msgs)-1]
		if !last.GetDone() || last.GetSucceeded() != n || last.GetFailed() != 0 {
			t.Fatalf("%v of %v ended %v; want done with %d succeeded", action, from, last, n)
		}
		return answered.Load() - before
	}
	during := bulk(conveyorv1.TaskAction_TASK_ACTION_ARCHIVE, conveyorv1.TaskState_TASK_STATE_PENDING)
	if q := queueCounts(t, s, "mass"); q.GetArchived() != n || q.GetPending() != 0 {
		t.Fatalf("after the bulk archive: %v", q)
	}
	during += bulk(conveyorv1.TaskAction_TASK_ACTION_RUN, conveyorv1.TaskState_TASK_STATE_ARCHIVED)
	if q := queueCounts(t, s, "mass"); q.GetPending() != n || q.GetArchived() != 0 {
		t.Fatalf("after the bulk run: %v", q)
	}
	if during == 0 {
		t.Fatal("the other queue got no dispatch while the bulk actions ran")
	}
}

// TestBulkTasksOnLargeTasks: tasks with the largest payloads are acted on
// a full chunk at a time (the listing under a bulk action leaves the
// payloads out), not a few per chunk as a listing's answer bound would
// allow.
func TestBulkTasksOnLargeTasks(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	payload := bytes.Repeat([]byte("x"), server.MaxPayloadBytes)
	for range 12 {
		enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "big", Type: "t", Payload: payload, ContentType: "application/octet-stream"})
	}
	msgs := runBulk(t, adminClient(t, s), &conveyorv1.BulkTasksRequest{
		Action: conveyorv1.TaskAction_TASK_ACTION_ARCHIVE, Queue: "big", State: conveyorv1.TaskState_TASK_STATE_PENDING}, nil)
	if last := msgs[len(msgs)-1]; len(msgs) != 1 || !last.GetDone() || last.GetSucceeded() != 12 {
		t.Fatalf("%d progress messages, last %v; want one chunk archiving all 12", len(msgs), last)
	}
	if q := queueCounts(t, s, "big"); q.GetArchived() != 12 {
		t.Fatalf("after the bulk archive: %v", q)
	}
}

// TestBulkTasksActsOnWhatWasThere: tasks enqueued into the state while a
// bulk action runs are left alone, so the action ends with the count it
// started from.
func TestBulkTasksActsOnWhatWasThere(t *testing.T) {
	t.Parallel()
	const n = 50_000
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	enqueueN(t, tasks, "bulk", "t", n)
	msgs := runBulk(t, adminClient(t, s), &conveyorv1.BulkTasksRequest{
		Action: conveyorv1.TaskAction_TASK_ACTION_ARCHIVE, Queue: "bulk", State: conveyorv1.TaskState_TASK_STATE_PENDING},
		func(i int) {
			if i == 0 { // the action has started: more tasks arrive
				enqueueN(t, tasks, "bulk", "t", 1000)
			}
		})
	last := msgs[len(msgs)-1]
	if !last.GetDone() || last.GetSucceeded() != n || last.GetFailed() != 0 {
		t.Fatalf("last progress %v; want done, %d archived", last, n)
	}
	if q := queueCounts(t, s, "bulk"); q.GetArchived() != n || q.GetPending() != 1000 {
		t.Fatalf("after the bulk archive: %v; want the %d archived, the 1000 enqueued since pending", q, n)
	}
}

// TestBulkTasksReachesIDsAheadOfTheClock: a task whose producer chose an
// id ahead of the server's clock, there when the action starts, is acted
// on like the others.
func TestBulkTasksReachesIDsAheadOfTheClock(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	enqueueN(t, tasks, "bulk", "t", 2)
	ahead := ulid.MustNew(ulid.Timestamp(time.Now().Add(time.Hour)), nil).String()
	enqueue(t, tasks, &conveyorv1.EnqueueRequest{TaskId: ahead, Queue: "bulk", Type: "t"})
	msgs := runBulk(t, adminClient(t, s), &conveyorv1.BulkTasksRequest{
		Action: conveyorv1.TaskAction_TASK_ACTION_ARCHIVE, Queue: "bulk", State: conveyorv1.TaskState_TASK_STATE_PENDING}, nil)
	last := msgs[len(msgs)-1]
	got, err := tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: ahead}))
	if err != nil {
		t.Fatal(err)
	}
	if last.GetSucceeded() != 3 || got.Msg.GetState() != conveyorv1.TaskState_TASK_STATE_ARCHIVED {
		t.Fatalf("last progress %v, the task with an id an hour ahead %s; want all 3 archived", last, got.Msg.GetState())
	}
}

// TestBulkTasksReachesIDsAheadOfTheClockWhileTasksArrive: a task whose
// producer chose an id ahead of the server's clock is reached even when
// tasks enqueued while the action runs sort before it: the action walks
// up to the greatest id listed at its start, skipping the new tasks.
func TestBulkTasksReachesIDsAheadOfTheClockWhileTasksArrive(t *testing.T) {
	t.Parallel()
	const n = 20_000
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	enqueueN(t, tasks, "bulk", "t", n)
	ahead := ulid.MustNew(ulid.Timestamp(time.Now().Add(time.Hour)), nil).String()
	enqueue(t, tasks, &conveyorv1.EnqueueRequest{TaskId: ahead, Queue: "bulk", Type: "t"})
	msgs := runBulk(t, adminClient(t, s), &conveyorv1.BulkTasksRequest{
		Action: conveyorv1.TaskAction_TASK_ACTION_ARCHIVE, Queue: "bulk", State: conveyorv1.TaskState_TASK_STATE_PENDING},
		func(i int) {
			if i == 0 { // the action has started: more tasks arrive, with ids below the one ahead
				enqueueN(t, tasks, "bulk", "t", 10)
			}
		})
	last := msgs[len(msgs)-1]
	got, err := tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: ahead}))
	if err != nil {
		t.Fatal(err)
	}
	if !last.GetDone() || last.GetSucceeded() != n+1 || got.Msg.GetState() != conveyorv1.TaskState_TASK_STATE_ARCHIVED {
		t.Fatalf("last progress %v, the task with an id an hour ahead %s; want all %d there at the start archived", last, got.Msg.GetState(), n+1)
	}
	if q := queueCounts(t, s, "bulk"); q.GetPending() != 10 {
		t.Fatalf("after the bulk archive: %v; want the 10 enqueued since pending", q)
	}
}

// TestBulkTasksOnAnEmptyState: a bulk action over a state with no task
// ends at once, done, with nothing acted on.
func TestBulkTasksOnAnEmptyState(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	msgs := runBulk(t, adminClient(t, s), &conveyorv1.BulkTasksRequest{
		Action: conveyorv1.TaskAction_TASK_ACTION_ARCHIVE, Queue: "none", State: conveyorv1.TaskState_TASK_STATE_PENDING}, nil)
	if last := msgs[len(msgs)-1]; !last.GetDone() || last.GetTotal() != 0 || last.GetSucceeded()+last.GetFailed() != 0 {
		t.Fatalf("progress %v over an empty state; want done, 0 of 0", msgs)
	}
}

// runBulk runs a bulk action to its end and returns its progress
// messages, checking that they never go backwards and that there is at
// least one. onProgress, when set, is called after the i-th is received.
func runBulk(t *testing.T, admin conveyorv1connect.AdminServiceClient, req *conveyorv1.BulkTasksRequest, onProgress func(i int)) []*conveyorv1.BulkTasksProgress {
	t.Helper()
	stream, err := admin.BulkTasks(context.Background(), connect.NewRequest(req))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*conveyorv1.BulkTasksProgress
	for stream.Receive() {
		m := stream.Msg()
		if n := len(msgs); n > 0 && m.GetSucceeded()+m.GetFailed() < msgs[n-1].GetSucceeded()+msgs[n-1].GetFailed() {
			t.Fatalf("progress went backwards: %v then %v", msgs[n-1], m)
		}
		msgs = append(msgs, m)
		if onProgress != nil {
			onProgress(len(msgs) - 1)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(msgs) == 0 {
		t.Fatalf("%v: no progress at all", req)
	}
	return msgs
}

// TestListTasksPageSizes: page_size 0 means 100, and 1000 is allowed; the
// last page has no next_page_token.
func TestListTasksPageSizes(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	enqueueN(t, taskClient(t, s, servertest.GRPC), "q", "t", 150)
	admin := adminClient(t, s)
	for _, tc := range []struct {
		size      int32
		want      int
		wantToken bool
	}{{0, server.DefaultPageSize, true}, {server.MaxPageSize, 150, false}, {150, 150, false}} {
		res, err := admin.ListTasks(context.Background(), connect.NewRequest(&conveyorv1.ListTasksRequest{Queue: "q", PageSize: tc.size}))
		if err != nil {
			t.Fatal(err)
		}
		if got := len(res.Msg.GetTasks()); got != tc.want || (res.Msg.GetNextPageToken() != "") != tc.wantToken {
			t.Errorf("page_size %d: %d tasks, next_page_token %q; want %d tasks, a token: %v",
				tc.size, got, res.Msg.GetNextPageToken(), tc.want, tc.wantToken)
		}
	}
}
