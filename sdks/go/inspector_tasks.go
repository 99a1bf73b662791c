package conveyor

import (
	"context"
	"iter"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
)

// ListTasksOptions selects the tasks ListTasks and AllTasks list.
type ListTasksOptions struct {
	// Queue is the queue to list; required.
	Queue string
	// State keeps the tasks in this state; TaskStateUnspecified (the zero
	// value) lists every state.
	State TaskState
	// Type keeps the tasks of this type (exact match); empty keeps every type.
	Type string
	// Search keeps the tasks whose id, a metadata value or payload contains
	// this case-sensitive substring (at most 1 KiB); empty keeps every task.
	Search string
	// Group keeps the tasks enqueued with this aggregation group (exact
	// match), in whatever state; empty keeps every task.
	Group string
	// PageSize is how many tasks a page holds at most, 1..1000. Defaults to
	// 100 (the server's default) when 0.
	PageSize int
	// PageToken continues a listing: a TaskPage's NextPageToken, given with
	// the same filters. Empty starts at the first task.
	PageToken string
}

func (o ListTasksOptions) proto() *conveyorv1.ListTasksRequest {
	return &conveyorv1.ListTasksRequest{Queue: o.Queue, State: conveyorv1.TaskState(o.State), Type: o.Type,
		Search: o.Search, Group: o.Group, PageSize: int32(min(max(o.PageSize, -1), maxPageSizeSent)), PageToken: o.PageToken}
}

// maxPageSizeSent keeps a PageSize past int32 from wrapping into a valid
// size: the server refuses it as the too-large size it is.
const maxPageSizeSent = 1<<31 - 1

// TaskPage is one page of a listing.
type TaskPage struct {
	// Tasks are in id order (enqueue order for ids the server made),
	// whatever their types and states.
	Tasks []*TaskInfo
	// NextPageToken continues the listing (ListTasksOptions.PageToken);
	// empty on the last page.
	NextPageToken string
}

// ListTasks returns one page of a queue's tasks that match opts. The order
// is stable: paging while tasks are enqueued or change state never skips
// nor repeats a task present throughout. A missing or invalid queue name,
// or a page size out of 0..1000, fails with ErrInvalidArgument; a queue
// the server does not know lists no task.
func (i *Inspector) ListTasks(ctx context.Context, opts ListTasksOptions) (*TaskPage, error) {
	res, err := adminCall(ctx, i.admin, opts.proto(), repeatable, conveyorv1connect.AdminServiceClient.ListTasks)
	if err != nil {
		return nil, err
	}
	page := &TaskPage{Tasks: make([]*TaskInfo, len(res.GetTasks())), NextPageToken: res.GetNextPageToken()}
	for k, m := range res.GetTasks() {
		page.Tasks[k] = newTaskInfo(m)
	}
	return page, nil
}

// AllTasks lists every task that matches opts, from opts.PageToken on,
// calling ListTasks for a page at a time (of opts.PageSize) as the loop
// asks for more. A failed call ends the sequence with its error (and a
// nil task):
//
//	for t, err := range insp.AllTasks(ctx, conveyor.ListTasksOptions{Queue: "emails", State: conveyor.TaskStateArchived}) {
//		if err != nil {
//			return err
//		}
//		fmt.Println(t.ID, t.LastError)
//	}
func (i *Inspector) AllTasks(ctx context.Context, opts ListTasksOptions) iter.Seq2[*TaskInfo, error] {
	return func(yield func(*TaskInfo, error) bool) {
		for {
			page, err := i.ListTasks(ctx, opts)
			if err != nil {
				yield(nil, err)
				return
			}
			for _, t := range page.Tasks {
				if !yield(t, nil) {
					return
				}
			}
			if page.NextPageToken == "" {
				return
			}
			opts.PageToken = page.NextPageToken
		}
	}
}

// GetTask returns the task with id, as Client.GetTask does (through the
// TaskService). An unknown (or purged) id fails with ErrNotFound, an
// empty one with ErrInvalidArgument.
func (i *Inspector) GetTask(ctx context.Context, id string) (*TaskInfo, error) {
	res, err := i.tasks.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
	if err != nil {
		return nil, wrapError(err)
	}
	return newTaskInfo(res.Msg), nil
}

// CancelTask cancels the task with id and returns it as the cancel left
// it. A waiting task (scheduled, pending, retry, blocked, aggregating)
// becomes canceled at once. A running one stays active: its worker is
// told to stop, and the worker's answer decides how it ends. A task that
// has already ended fails with code failed_precondition, an unknown id
// with ErrNotFound.
func (i *Inspector) CancelTask(ctx context.Context, id string) (*TaskInfo, error) {
	res, err := adminCall(ctx, i.admin, &conveyorv1.CancelTaskRequest{Id: id}, once, conveyorv1connect.AdminServiceClient.CancelTask)
	if err != nil {
		return nil, err
	}
	return newTaskInfo(res), nil
}

// RunTask makes a scheduled, retry, blocked (its dependencies then
// ignored), archived or canceled task pending now, and returns it so. A
// task in another state fails with code failed_precondition, an unknown
// id with ErrNotFound.
func (i *Inspector) RunTask(ctx context.Context, id string) (*TaskInfo, error) {
	res, err := adminCall(ctx, i.admin, &conveyorv1.RunTaskRequest{Id: id}, once, conveyorv1connect.AdminServiceClient.RunTask)
	if err != nil {
		return nil, err
	}
	return newTaskInfo(res), nil
}

// ArchiveTask archives a task that is neither running nor finished, and
// returns it archived. A running or finished task fails with code
// failed_precondition, an unknown id with ErrNotFound.
func (i *Inspector) ArchiveTask(ctx context.Context, id string) (*TaskInfo, error) {
	res, err := adminCall(ctx, i.admin, &conveyorv1.ArchiveTaskRequest{Id: id}, once, conveyorv1connect.AdminServiceClient.ArchiveTask)
	if err != nil {
		return nil, err
	}
	return newTaskInfo(res), nil
}

// DeleteTask removes a task that is not running, for good. A running task
// fails with code failed_precondition, an unknown id with ErrNotFound.
func (i *Inspector) DeleteTask(ctx context.Context, id string) error {
	_, err := adminCall(ctx, i.admin, &conveyorv1.DeleteTaskRequest{Id: id}, once, conveyorv1connect.AdminServiceClient.DeleteTask)
	return err
}
