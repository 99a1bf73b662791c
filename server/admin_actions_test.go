package server_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/oklog/ulid/v2"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// The task states, and two outcomes of an action that are not states.
const (
	tsScheduled   = conveyorv1.TaskState_TASK_STATE_SCHEDULED
	tsRetry       = conveyorv1.TaskState_TASK_STATE_RETRY
	tsAggregating = conveyorv1.TaskState_TASK_STATE_AGGREGATING
	tsBlocked     = conveyorv1.TaskState_TASK_STATE_BLOCKED
	tsPending     = conveyorv1.TaskState_TASK_STATE_PENDING
	tsActive      = conveyorv1.TaskState_TASK_STATE_ACTIVE
	tsArchived    = conveyorv1.TaskState_TASK_STATE_ARCHIVED
	tsCanceled    = conveyorv1.TaskState_TASK_STATE_CANCELED
	tsCompleted   = conveyorv1.TaskState_TASK_STATE_COMPLETED
	// tsGone: the task was deleted.
	tsGone = conveyorv1.TaskState(-1)
	// tsRefused: the action answers failed_precondition.
	tsRefused = conveyorv1.TaskState(-2)
)

// actionRules is CONTRACT.md's "Task listing and actions", for a task in
// each state: what each action leaves it as.
var actionRules = map[conveyorv1.TaskState]map[string]conveyorv1.TaskState{
	tsScheduled:   {"cancel": tsCanceled, "run": tsPending, "archive": tsArchived, "delete": tsGone},
	tsPending:     {"cancel": tsCanceled, "run": tsRefused, "archive": tsArchived, "delete": tsGone},
	tsActive:      {"cancel": tsActive, "run": tsRefused, "archive": tsRefused, "delete": tsRefused},
	tsRetry:       {"cancel": tsCanceled, "run": tsPending, "archive": tsArchived, "delete": tsGone},
	tsCompleted:   {"cancel": tsRefused, "run": tsRefused, "archive": tsRefused, "delete": tsGone},
	tsArchived:    {"cancel": tsRefused, "run": tsPending, "archive": tsRefused, "delete": tsGone},
	tsCanceled:    {"cancel": tsRefused, "run": tsPending, "archive": tsRefused, "delete": tsGone},
	tsAggregating: {"cancel": tsCanceled, "run": tsRefused, "archive": tsArchived, "delete": tsGone},
	tsBlocked:     {"cancel": tsCanceled, "run": tsPending, "archive": tsArchived, "delete": tsGone},
}

// TestTaskActionsInEveryState applies each single action to a task in
// each state over the wire, and checks the state it answers, the code of
// a refusal, and the unique key: held while the task is incomplete, free
// once it is terminal or tsGone.
func TestTaskActionsInEveryState(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{GroupPolicy: brokerGroupPolicy(100, time.Hour, time.Hour)})
	tasks := taskClient(t, s, servertest.GRPC)
	admin := adminClient(t, s)
	ids := tasksInEveryState(t, s, tasks, admin)
	ctx := context.Background()
	for state, rules := range actionRules {
		for action, want := range rules {
			id := ids[state][action]
			got, err := act(ctx, admin, action, id)
			what := action + " of a " + state.String() + " task"
			switch want {
			case tsRefused:
				requireCode(t, what, err, connect.CodeFailedPrecondition)
				continue
			case tsGone:
				if err != nil {
					t.Fatalf("%s: %v", what, err)
				}
				_, err := tasks.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
				requireCode(t, what+", then GetTask", err, connect.CodeNotFound)
			default:
				if err != nil || got.GetState() != want {
					t.Fatalf("%s: %v %v, want %s", what, got.GetState(), err, want)
				}
			}
			_, err = tasks.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "q", Type: "t",
				Options: &conveyorv1.TaskOptions{UniqueKey: id}}))
			if held := want == tsPending || want == tsActive; held != (connect.CodeOf(err) == connect.CodeAlreadyExists) {
				t.Errorf("%s: enqueue with its unique key: %v; the key should be held: %v", what, err, held)
			}
		}
	}
}

func act(ctx context.Context, admin conveyorv1connect.AdminServiceClient, action, id string) (*conveyorv1.TaskInfo, error) {
	var res *connect.Response[conveyorv1.TaskInfo]
	var err error
	switch action {
	case "cancel":
		res, err = admin.CancelTask(ctx, connect.NewRequest(&conveyorv1.CancelTaskRequest{Id: id}))
	case "run":
		res, err = admin.RunTask(ctx, connect.NewRequest(&conveyorv1.RunTaskRequest{Id: id}))
	case "archive":
		res, err = admin.ArchiveTask(ctx, connect.NewRequest(&conveyorv1.ArchiveTaskRequest{Id: id}))
	case "delete":
		_, err = admin.DeleteTask(ctx, connect.NewRequest(&conveyorv1.DeleteTaskRequest{Id: id}))
	}
	if err != nil || res == nil {
		return nil, err
	}
	return res.Msg, nil
}

// tasksInEveryState makes, for each state of actionRules and each action,
// a task in that state whose unique key is its id, and returns their ids.
// A worker on queue "w" takes the ACTIVE, RETRY and COMPLETED ones there,
// and "w" is then paused so that a run task stays PENDING; the others are
// in queue "q", which no worker serves.
func tasksInEveryState(t *testing.T, s *servertest.Server, tasks conveyorv1connect.TaskServiceClient, admin conveyorv1connect.AdminServiceClient) map[conveyorv1.TaskState]map[string]string {
	t.Helper()
	ctx := context.Background()
	dep := enqueueN(t, tasks, "q", "dep", 1)[0]
	byWorker := map[conveyorv1.TaskState]bool{tsActive: true, tsRetry: true, tsCompleted: true}
	ids := map[conveyorv1.TaskState]map[string]string{}
	roles := map[string]conveyorv1.TaskState{} // what the worker makes of each task
	for state, rules := range actionRules {
		ids[state] = map[string]string{}
		for action := range rules {
			id := enqueueIn(t, tasks, state, dep, byWorker[state])
			ids[state][action] = id
			if byWorker[state] {
				roles[id] = state
			}
			switch state {
			case tsArchived:
				if _, err := admin.ArchiveTask(ctx, connect.NewRequest(&conveyorv1.ArchiveTaskRequest{Id: id})); err != nil {
					t.Fatal(err)
				}
			case tsCanceled:
				if _, err := admin.CancelTask(ctx, connect.NewRequest(&conveyorv1.CancelTaskRequest{Id: id})); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"w": 1}, Concurrency: int32(len(roles))})
	if err != nil {
		t.Fatal(err)
	}
	for range roles {
		d := w.next(10 * time.Second).GetDispatch()
		outcome := map[conveyorv1.TaskState]conveyorv1.TaskOutcome{tsCompleted: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS,
			tsRetry: conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY}[roles[d.GetTask().GetId()]]
		if outcome != 0 {
			w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
				TaskId: d.GetTask().GetId(), AttemptId: d.GetAttemptId(), Outcome: outcome, ErrorMsg: "failed"}}})
		}
	}
	servertest.Eventually(t, 10*time.Second, "the worker's tasks in their states", func() bool {
		for id, state := range roles {
			got, err := tasks.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
			if err != nil || got.Msg.GetState() != state {
				return false
			}
		}
		return true
	})
	if _, err := admin.PauseQueue(ctx, connect.NewRequest(&conveyorv1.PauseQueueRequest{Queue: "w"})); err != nil {
		t.Fatal(err)
	}
	return ids
}

// enqueueIn enqueues a task that starts in state, or (for the states a
// worker or an action makes) the PENDING task that becomes it.
func enqueueIn(t *testing.T, tasks conveyorv1connect.TaskServiceClient, state conveyorv1.TaskState, dep string, byWorker bool) string {
	t.Helper()
	req := &conveyorv1.EnqueueRequest{Queue: "q", Type: "t", Options: &conveyorv1.TaskOptions{}}
	o := req.Options
	switch state {
	case tsScheduled:
		o.ProcessIn = dur(time.Hour)
	case tsAggregating:
		o.Group = "g"
	case tsBlocked:
		o.DependsOn = []*conveyorv1.TaskDependency{{TaskId: dep}}
	}
	if byWorker {
		req.Queue = "w"
		o.RetryPolicy = &conveyorv1.RetryPolicy{Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED, Base: dur(time.Hour)}
	}
	// Each task holds its own unique key, and gets its id from it.
	req.TaskId = ulid.Make().String()
	o.UniqueKey = req.TaskId
	if _, err := tasks.Enqueue(context.Background(), connect.NewRequest(req)); err != nil {
		t.Fatal(err)
	}
	return req.TaskId
}

// TestCanceledRunningTaskEnds: a task canceled while it runs stays ACTIVE
// until its worker's Result decides: SUCCESS completes it, RELEASED
// cancels it, and so does the worker's stream closing with the task still
// held (CONTRACT.md, CancelTask).
func TestCanceledRunningTaskEnds(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	admin := adminClient(t, s)
	ctx := context.Background()
	ids := enqueueN(t, tasks, "q", "t", 3)
	w, _, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 3})
	if err != nil {
		t.Fatal(err)
	}
	attempts := map[string]string{}
	for range ids {
		d := w.next(10 * time.Second).GetDispatch()
		attempts[d.GetTask().GetId()] = d.GetAttemptId()
	}
	for _, id := range ids {
		got, err := act(ctx, admin, "cancel", id)
		if err != nil || got.GetState() != tsActive {
			t.Fatalf("cancel of a running task: %v %v, want it ACTIVE", got.GetState(), err)
		}
	}
	want := map[string]conveyorv1.TaskState{ids[0]: tsCompleted, ids[1]: tsCanceled, ids[2]: tsCanceled}
	for id, outcome := range map[string]conveyorv1.TaskOutcome{
		ids[0]: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS, ids[1]: conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED,
	} {
		w.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: &conveyorv1.Result{
			TaskId: id, AttemptId: attempts[id], Outcome: outcome}}})
	}
	servertest.Eventually(t, 10*time.Second, "the answered tasks decided", func() bool {
		return stateOf(t, tasks, ids[0]) == tsCompleted && stateOf(t, tasks, ids[1]) == tsCanceled
	})
	if err := w.stream.CloseRequest(); err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 10*time.Second, "the held task canceled when the stream closed", func() bool {
		return stateOf(t, tasks, ids[2]) == tsCanceled
	})
	for id, state := range want {
		if got := stateOf(t, tasks, id); got != state {
			t.Errorf("task %s ended %s, want %s", id, got, state)
		}
	}
}

func stateOf(t *testing.T, tasks conveyorv1connect.TaskServiceClient, id string) conveyorv1.TaskState {
	t.Helper()
	got, err := tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
	if err != nil {
		t.Fatal(err)
	}
	return got.Msg.GetState()
}
