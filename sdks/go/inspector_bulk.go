package conveyor

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
)

// TaskActionResult is the outcome of one id of a batch action.
type TaskActionResult struct {
	// ID is the task's id, as given.
	ID string
	// Err says why the action did not apply to the task; nil when it did.
	// It is an *Error with the server's message and code for the task
	// (such as "task 01J...: not found"), which errors.Is matches against
	// the sentinels (ErrNotFound, ErrFailedPrecondition) as for a single
	// call.
	Err error
}

// BatchCancelTasks cancels the tasks of 1..1000 ids, each as CancelTask
// would; the tasks succeed or fail independently, and results[k] is the
// outcome of ids[k]. The call itself fails only for no ids or more than
// 1000 (ErrInvalidArgument), or when the server cannot be reached.
func (i *Inspector) BatchCancelTasks(ctx context.Context, ids []string) ([]TaskActionResult, error) {
	return batchResults(adminCall(ctx, i.admin, &conveyorv1.BatchCancelTasksRequest{Ids: ids}, once, conveyorv1connect.AdminServiceClient.BatchCancelTasks))
}

// BatchRunTasks runs the tasks of 1..1000 ids now, each as RunTask would;
// see BatchCancelTasks for the results.
func (i *Inspector) BatchRunTasks(ctx context.Context, ids []string) ([]TaskActionResult, error) {
	return batchResults(adminCall(ctx, i.admin, &conveyorv1.BatchRunTasksRequest{Ids: ids}, once, conveyorv1connect.AdminServiceClient.BatchRunTasks))
}

// BatchArchiveTasks archives the tasks of 1..1000 ids, each as ArchiveTask
// would; see BatchCancelTasks for the results.
func (i *Inspector) BatchArchiveTasks(ctx context.Context, ids []string) ([]TaskActionResult, error) {
	return batchResults(adminCall(ctx, i.admin, &conveyorv1.BatchArchiveTasksRequest{Ids: ids}, once, conveyorv1connect.AdminServiceClient.BatchArchiveTasks))
}

// BatchDeleteTasks deletes the tasks of 1..1000 ids, each as DeleteTask
// would; see BatchCancelTasks for the results.
func (i *Inspector) BatchDeleteTasks(ctx context.Context, ids []string) ([]TaskActionResult, error) {
	return batchResults(adminCall(ctx, i.admin, &conveyorv1.BatchDeleteTasksRequest{Ids: ids}, once, conveyorv1connect.AdminServiceClient.BatchDeleteTasks))
}

func batchResults(res *conveyorv1.BatchTasksResponse, err error) ([]TaskActionResult, error) {
	if err != nil {
		return nil, err
	}
	out := make([]TaskActionResult, len(res.GetResults()))
	for k, r := range res.GetResults() {
		out[k].ID = r.GetId()
		if r.GetError() != "" {
			out[k].Err = &Error{err: connect.NewError(resultCode(r.GetCode()), errors.New(r.GetError()))}
		}
	}
	return out, nil
}

// resultCode reads a per-task result's code; a server older than the
// field sends none, which reads as unknown.
func resultCode(name string) connect.Code {
	var c connect.Code
	if err := c.UnmarshalText([]byte(name)); err != nil {
		return connect.CodeUnknown
	}
	return c
}

// TaskAction is an operator action on tasks, for BulkTasks. The values
// are the numbers of the wire's conveyor.v1.TaskAction.
type TaskAction int32

// The task actions.
const (
	// TaskActionCancel cancels, as CancelTask does.
	TaskActionCancel TaskAction = 1
	// TaskActionDelete deletes, as DeleteTask does.
	TaskActionDelete TaskAction = 2
	// TaskActionRun runs now, as RunTask does.
	TaskActionRun TaskAction = 3
	// TaskActionArchive archives, as ArchiveTask does.
	TaskActionArchive TaskAction = 4
)

var taskActionNames = [...]string{"unspecified", "cancel", "delete", "run", "archive"}

// String returns the action's name in lower case, such as "archive".
func (a TaskAction) String() string {
	if a >= 0 && int(a) < len(taskActionNames) {
		return taskActionNames[a]
	}
	return fmt.Sprintf("TaskAction(%d)", int32(a))
}

// BulkTasksOptions selects the tasks BulkTasks acts on, as ListTasksOptions
// selects a listing's, and where its progress goes.
type BulkTasksOptions struct {
	// Queue is the queue whose tasks are acted on; required.
	Queue string
	// State is the state of the tasks acted on; required.
	State TaskState
	// Type keeps the tasks of this type (exact match); empty keeps every type.
	Type string
	// Search keeps the tasks whose id, a metadata value or payload contains
	// this case-sensitive substring; empty keeps every task.
	Search string
	// Group keeps the tasks enqueued with this aggregation group; empty
	// keeps every task.
	Group string
	// Progress, if set, is called with each progress report the server
	// sends, after each chunk of tasks, the last one with Done set; it is
	// called on the calling goroutine, so a slow Progress slows the call.
	Progress func(BulkProgress)
}

// BulkProgress reports how far a BulkTasks call has come.
type BulkProgress struct {
	// Total is how many tasks the filter matched when the action started
	// (an estimate when Type, Search or Group narrows it); once Done, how
	// many tasks the action met (Succeeded + Failed).
	Total int64
	// Succeeded counts the tasks the action applied to.
	Succeeded int64
	// Failed counts the tasks the action did not apply to: they changed
	// state meanwhile.
	Failed int64
	// Done is set on the final report.
	Done bool
	// FirstError is the first per-task error met, if any.
	FirstError string
}

// BulkTasks applies action to every task of a queue in one state (and of
// one type, group or search, if given) that was enqueued before the call
// began, in chunks of at most 500 tasks (one commit each, so dispatch
// never waits long), and returns the final counts. Tasks enqueued
// meanwhile are left alone; tasks that changed state meanwhile count as
// Failed. An action the state never takes (running pending tasks,
// deleting active ones) is refused with code failed_precondition before
// any task is touched, and a missing queue or state with
// ErrInvalidArgument.
//
// Ending ctx stops the action between chunks: the chunks done stay done.
// When the call fails after the server reported progress, it returns the
// last report along with the error.
func (i *Inspector) BulkTasks(ctx context.Context, action TaskAction, opts BulkTasksOptions) (BulkProgress, error) {
	req := &conveyorv1.BulkTasksRequest{Action: conveyorv1.TaskAction(action), Queue: opts.Queue,
		State: conveyorv1.TaskState(opts.State), Type: opts.Type, Search: opts.Search, Group: opts.Group}
	a := i.admin
	n := int64(len(a.servers))
	start := a.current.Load()
	var last BulkProgress
	var err error
	for k := range n {
		s := (start + k) % n
		var heard bool
		last, heard, err = bulkOn(ctx, a.servers[s], req, opts.Progress)
		// A server that reported progress has acted: its answer stands.
		if err == nil || heard || n == 1 || !movesOn(err, once) || ctx.Err() != nil {
			break
		}
		a.current.CompareAndSwap(s, (s+1)%n)
	}
	return last, wrapError(err)
}

// bulkOn runs a BulkTasks stream on one server to its end. heard says
// whether the server sent any progress.
func bulkOn(ctx context.Context, c conveyorv1connect.AdminServiceClient, req *conveyorv1.BulkTasksRequest,
	progress func(BulkProgress),
) (last BulkProgress, heard bool, err error) {
	stream, err := c.BulkTasks(ctx, connect.NewRequest(req))
	if err != nil {
		return last, false, err
	}
	defer func() { _ = stream.Close() }()
	for stream.Receive() {
		m := stream.Msg()
		last, heard = BulkProgress{Total: m.GetTotal(), Succeeded: m.GetSucceeded(), Failed: m.GetFailed(),
			Done: m.GetDone(), FirstError: m.GetFirstError()}, true
		if progress != nil {
			progress(last)
		}
	}
	if err := stream.Err(); err != nil {
		return last, heard, err
	}
	if !last.Done {
		return last, heard, errors.New("conveyor: the server's BulkTasks stream ended without its final progress")
	}
	return last, heard, nil
}
