package server

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// Bounds of the task listing and actions.
const (
	// DefaultPageSize is ListTasks' page size when the request says 0.
	DefaultPageSize = 100
	// MaxPageSize bounds ListTasks' page_size.
	MaxPageSize = 1000
	// MaxSearchBytes bounds ListTasks' search string.
	MaxSearchBytes = 1024
	// bulkChunk is how many tasks BulkTasks acts on per engine call (one
	// commit): small enough never to hold dispatch up for long.
	bulkChunk = 500
)

func (a *adminService) ListTasks(ctx context.Context, req *connect.Request[conveyorv1.ListTasksRequest]) (*connect.Response[conveyorv1.ListTasksResponse], error) {
	m := req.Msg
	p, err := listParams(m)
	if err != nil {
		return nil, err
	}
	size := m.GetPageSize()
	switch {
	case size == 0:
		size = DefaultPageSize
	case size < 0 || size > MaxPageSize:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("page_size must be 0..%d, got %d", MaxPageSize, size))
	}
	p.Limit, p.Cursor = int(size), m.GetPageToken()
	page, err := a.broker.ListTasks(ctx, p)
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	out := &conveyorv1.ListTasksResponse{NextPageToken: page.Next}
	for _, t := range page.Tasks {
		out.Tasks = append(out.Tasks, taskInfo(t, a.server.hub.AttemptID))
	}
	return connect.NewResponse(out), nil
}

// taskFilter is the filters a listing and a bulk action share.
type taskFilter interface {
	GetQueue() string
	GetState() conveyorv1.TaskState
	GetType() string
	GetSearch() string
	GetGroup() string
}

// listParams validates a listing's filters.
func listParams(f taskFilter) (broker.ListParams, error) {
	queue, state, typ, search, group := f.GetQueue(), f.GetState(), f.GetType(), f.GetSearch(), f.GetGroup()
	if err := checkQueueName("queue", queue); err != nil {
		return broker.ListParams{}, err
	}
	if _, ok := conveyorv1.TaskState_name[int32(state)]; !ok {
		return broker.ListParams{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("state %d is not a TaskState", state))
	}
	if len(typ) > MaxNameBytes {
		return broker.ListParams{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("type is %d bytes; the limit is %d", len(typ), MaxNameBytes))
	}
	if len(search) > MaxSearchBytes {
		return broker.ListParams{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("search is %d bytes; the limit is %d", len(search), MaxSearchBytes))
	}
	if len(group) > MaxNameBytes {
		return broker.ListParams{}, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("group is %d bytes; the limit is %d", len(group), MaxNameBytes))
	}
	return broker.ListParams{Queue: queue, State: brokerState(state), Type: typ, Search: search, Group: group}, nil
}

// act applies an action to ids and tells the sessions of canceled running
// tasks to stop them.
func (a *adminService) act(ctx context.Context, action broker.Action, ids []string) ([]broker.ActResult, error) {
	return a.actFrom(ctx, action, broker.StateUnspecified, ids)
}

// actFrom is act on tasks the caller found in state from (any, when
// unspecified): one that has left it meanwhile is refused.
func (a *adminService) actFrom(ctx context.Context, action broker.Action, from broker.State, ids []string) ([]broker.ActResult, error) {
	res, err := a.apply(ctx, broker.ActParams{Action: action, IDs: ids, From: from})
	if err != nil {
		return nil, err
	}
	a.tellWorkers(res)
	return res, nil
}

func (a *adminService) apply(ctx context.Context, p broker.ActParams) ([]broker.ActResult, error) {
	p.Now = a.server.now()
	res, err := a.broker.Act(ctx, p)
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	return res, nil
}

// tellWorkers sends Cancel to the sessions of the running tasks res
// canceled.
func (a *adminService) tellWorkers(res []broker.ActResult) {
	for _, r := range res {
		if r.Running != nil {
			a.server.hub.RunningCanceled(*r.Running)
			a.server.push.RunningCanceled(*r.Running)
		}
	}
}

// actOne applies an action to one task and answers with the task as the
// action left it: a running task's worker is told to stop only once the
// answer is read, or its Result could overtake the read (a canceled
// running task answers ACTIVE, as the contract says, not what its worker
// made of the Cancel).
func (a *adminService) actOne(ctx context.Context, action broker.Action, id string) (*conveyorv1.TaskInfo, error) {
	if id == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("id is required"))
	}
	res, err := a.apply(ctx, broker.ActParams{Action: action, IDs: []string{id}})
	if err != nil {
		return nil, err
	}
	defer a.tellWorkers(res)
	if err := res[0].Err; err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	if action == broker.ActionDelete {
		return nil, nil
	}
	t, err := a.broker.GetTask(ctx, id)
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	return taskInfo(t, a.server.hub.AttemptID), nil
}

func (a *adminService) CancelTask(ctx context.Context, req *connect.Request[conveyorv1.CancelTaskRequest]) (*connect.Response[conveyorv1.TaskInfo], error) {
	t, err := a.actOne(ctx, broker.ActionCancel, req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(t), nil
}

func (a *adminService) RunTask(ctx context.Context, req *connect.Request[conveyorv1.RunTaskRequest]) (*connect.Response[conveyorv1.TaskInfo], error) {
	t, err := a.actOne(ctx, broker.ActionRun, req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(t), nil
}

func (a *adminService) ArchiveTask(ctx context.Context, req *connect.Request[conveyorv1.ArchiveTaskRequest]) (*connect.Response[conveyorv1.TaskInfo], error) {
	t, err := a.actOne(ctx, broker.ActionArchive, req.Msg.GetId())
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(t), nil
}

func (a *adminService) DeleteTask(ctx context.Context, req *connect.Request[conveyorv1.DeleteTaskRequest]) (*connect.Response[conveyorv1.DeleteTaskResponse], error) {
	if _, err := a.actOne(ctx, broker.ActionDelete, req.Msg.GetId()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&conveyorv1.DeleteTaskResponse{}), nil
}

// actBatch applies an action to 1..MaxBatchItems ids, one result each.
func (a *adminService) actBatch(ctx context.Context, action broker.Action, ids []string) (*connect.Response[conveyorv1.BatchTasksResponse], error) {
	if len(ids) < 1 || len(ids) > MaxBatchItems {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("ids must hold 1..%d ids, got %d", MaxBatchItems, len(ids)))
	}
	res, err := a.act(ctx, action, ids)
	if err != nil {
		return nil, err
	}
	out := &conveyorv1.BatchTasksResponse{Results: make([]*conveyorv1.BatchTaskResult, len(ids))}
	for i, r := range res {
		out.Results[i] = &conveyorv1.BatchTaskResult{Id: ids[i]}
		if r.Err != nil {
			err := wire.ConnectError(a.server.log, r.Err)
			out.Results[i].Error = errorText(err)
			out.Results[i].Code = connect.CodeOf(err).String()
		}
	}
	return connect.NewResponse(out), nil
}

func (a *adminService) BatchCancelTasks(ctx context.Context, req *connect.Request[conveyorv1.BatchCancelTasksRequest]) (*connect.Response[conveyorv1.BatchTasksResponse], error) {
	return a.actBatch(ctx, broker.ActionCancel, req.Msg.GetIds())
}

func (a *adminService) BatchDeleteTasks(ctx context.Context, req *connect.Request[conveyorv1.BatchDeleteTasksRequest]) (*connect.Response[conveyorv1.BatchTasksResponse], error) {
	return a.actBatch(ctx, broker.ActionDelete, req.Msg.GetIds())
}

func (a *adminService) BatchRunTasks(ctx context.Context, req *connect.Request[conveyorv1.BatchRunTasksRequest]) (*connect.Response[conveyorv1.BatchTasksResponse], error) {
	return a.actBatch(ctx, broker.ActionRun, req.Msg.GetIds())
}

func (a *adminService) BatchArchiveTasks(ctx context.Context, req *connect.Request[conveyorv1.BatchArchiveTasksRequest]) (*connect.Response[conveyorv1.BatchTasksResponse], error) {
	return a.actBatch(ctx, broker.ActionArchive, req.Msg.GetIds())
}

// BulkTasks applies an action to every task of a queue in one state (and
// type, and search), a chunk at a time: each chunk is one listing page and
// one engine call, so dispatch never waits for more than one chunk. It
// reports its progress after every chunk and stops, between chunks, when
// the client goes away. It acts on every task that matched when it began,
// whatever ids their producers chose, and leaves alone those enqueued
// since: it walks the listing in id order up to the greatest id the
// listing held at its start, skipping the tasks enqueued after it, so a
// steady stream of new tasks cannot keep it going.
func (a *adminService) BulkTasks(ctx context.Context, req *connect.Request[conveyorv1.BulkTasksRequest], stream *connect.ServerStream[conveyorv1.BulkTasksProgress]) error {
	m := req.Msg
	if _, ok := conveyorv1.TaskAction_name[int32(m.GetAction())]; !ok || m.GetAction() == conveyorv1.TaskAction_TASK_ACTION_UNSPECIFIED {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("action %d is not a TaskAction", m.GetAction()))
	}
	if m.GetState() == conveyorv1.TaskState_TASK_STATE_UNSPECIFIED {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("state is required: a bulk action names the state it applies to"))
	}
	p, err := listParams(m)
	if err != nil {
		return err
	}
	action := broker.Action(m.GetAction())
	if !action.Applies(p.State) {
		// Every task would fail on its own, a chunk at a time: say so once.
		return connect.NewError(connect.CodeFailedPrecondition,
			fmt.Errorf("%s does not apply to %s tasks", action, p.State))
	}
	q, err := a.broker.Queue(ctx, p.Queue)
	if err != nil {
		return wire.ConnectError(a.server.log, err)
	}
	progress := &conveyorv1.BulkTasksProgress{Total: q.Counts[p.State]}
	start := a.server.now()
	last, err := a.lastListed(ctx, p)
	if err != nil {
		return err
	}
	p.Limit, p.Brief = bulkChunk, true
	for last != "" {
		page, err := a.broker.ListTasks(ctx, p)
		if err != nil {
			return wire.ConnectError(a.server.log, err)
		}
		ids := make([]string, 0, len(page.Tasks))
		for _, t := range page.Tasks {
			if t.ID > last {
				page.Next = "" // only tasks enqueued since, from here on
				break
			}
			if !t.EnqueuedAt.After(start) {
				ids = append(ids, t.ID)
			}
		}
		if len(ids) > 0 {
			res, err := a.actFrom(ctx, action, p.State, ids)
			if err != nil {
				return err
			}
			for _, r := range res {
				if r.Err == nil {
					progress.Succeeded++
					continue
				}
				progress.Failed++
				if progress.FirstError == "" {
					progress.FirstError = errorText(wire.ConnectError(a.server.log, r.Err))
				}
			}
		}
		progress.Done = page.Next == ""
		if progress.Done {
			// The start's total was a count of the state (an estimate
			// under a filter, and tasks move meanwhile): the last message
			// says how many the action met.
			progress.Total = progress.Succeeded + progress.Failed
		}
		if err := stream.Send(progress); err != nil {
			return err
		}
		if progress.Done {
			return nil
		}
		p.Cursor = page.Next
	}
	progress.Done, progress.Total = true, 0 // nothing listed at the start
	return stream.Send(progress)
}

// lastListed is the greatest id of the tasks p lists now (empty: none),
// the end of a bulk action's walk: a task that matched at its start has
// an id no greater, whoever chose it. The search and the group filter are
// left out: they would only lower the bound, at the price of examining
// the tasks they skip.
func (a *adminService) lastListed(ctx context.Context, p broker.ListParams) (string, error) {
	p.Search, p.Group, p.Descending, p.Limit, p.Brief = "", "", true, 1, true
	page, err := a.broker.ListTasks(ctx, p)
	if err != nil {
		return "", wire.ConnectError(a.server.log, err)
	}
	if len(page.Tasks) == 0 {
		return "", nil
	}
	return page.Tasks[0].ID, nil
}
