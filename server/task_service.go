package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
	"github.com/conveyor-dev/conveyor/server/sessions"
)

// taskService implements conveyor.v1.TaskService on a broker.
type taskService struct {
	conveyorv1connect.UnimplementedTaskServiceHandler
	broker  broker.Broker
	log     *slog.Logger
	now     func() time.Time
	hub     *sessions.Hub
	metrics *metrics
	rooms   *roomWaits
}

func (s *taskService) Enqueue(ctx context.Context, req *connect.Request[conveyorv1.EnqueueRequest]) (*connect.Response[conveyorv1.EnqueueResponse], error) {
	now := s.now()
	nt, err := newTask(req.Msg, now)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	res, err := s.broker.Enqueue(ctx, broker.EnqueueParams{Tasks: []broker.NewTask{nt}, Now: now})
	if err == nil && anyFull(res) {
		s.waitForRoom(ctx, res, func(_ int, now time.Time) (broker.NewTask, error) { return newTask(req.Msg, now) })
	}
	if err == nil {
		err = res[0].Err
	}
	if err != nil {
		return nil, wire.ConnectError(s.log, err)
	}
	s.metrics.enqueuedTask(res[0].Task)
	return connect.NewResponse(&conveyorv1.EnqueueResponse{Task: taskInfo(res[0].Task, nil)}), nil
}

func checkItemCount(n int) error {
	if n < 1 || n > MaxBatchItems {
		return connect.NewError(connect.CodeInvalidArgument,
			fmt.Errorf("items must hold 1..%d items, got %d", MaxBatchItems, n))
	}
	return nil
}

func (s *taskService) EnqueueBatch(ctx context.Context, req *connect.Request[conveyorv1.EnqueueBatchRequest]) (*connect.Response[conveyorv1.EnqueueBatchResponse], error) {
	items := req.Msg.GetItems()
	if err := checkItemCount(len(items)); err != nil {
		return nil, err
	}
	now := s.now()
	results := make([]*conveyorv1.EnqueueBatchResult, len(items))
	tasks := make([]broker.NewTask, 0, len(items))
	index := make([]int, 0, len(items)) // tasks[j] is items[index[j]]
	for i, it := range items {
		nt, err := newTask(it, now)
		if err != nil {
			results[i] = &conveyorv1.EnqueueBatchResult{Error: errorText(err), Code: connect.CodeInvalidArgument.String()}
			continue
		}
		tasks = append(tasks, nt)
		index = append(index, i)
	}
	if len(tasks) > 0 {
		res, err := s.broker.Enqueue(ctx, broker.EnqueueParams{Tasks: tasks, Now: now})
		if err == nil && anyFull(res) {
			s.waitForRoom(ctx, res, func(j int, now time.Time) (broker.NewTask, error) { return newTask(items[index[j]], now) })
		}
		if err != nil && res == nil {
			return nil, wire.ConnectError(s.log, err)
		}
		for j, r := range res {
			if r.Err != nil {
				ce := wire.ConnectError(s.log, r.Err)
				results[index[j]] = &conveyorv1.EnqueueBatchResult{Error: errorText(ce), Code: connect.CodeOf(ce).String()}
				continue
			}
			s.metrics.enqueuedTask(r.Task)
			results[index[j]] = &conveyorv1.EnqueueBatchResult{Task: enqueuedInfo(r.Task, req.Msg.GetBrief())}
		}
	}
	return connect.NewResponse(&conveyorv1.EnqueueBatchResponse{Results: results}), nil
}

func (s *taskService) EnqueueTx(ctx context.Context, req *connect.Request[conveyorv1.EnqueueTxRequest]) (*connect.Response[conveyorv1.EnqueueTxResponse], error) {
	items := req.Msg.GetItems()
	if err := checkItemCount(len(items)); err != nil {
		return nil, err
	}
	now := s.now()
	tasks := make([]broker.NewTask, len(items))
	for i, it := range items {
		nt, err := newTask(it, now)
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("items[%d]: %w", i, err))
		}
		tasks[i] = nt
	}
	out, err := s.broker.EnqueueTx(ctx, broker.EnqueueParams{Tasks: tasks, Now: now})
	if fullQueue(err) != "" {
		out, err = s.waitForTxRoom(ctx, tasks, err, func(j int, now time.Time) (broker.NewTask, error) { return newTask(items[j], now) })
	}
	if err != nil {
		return nil, wire.ConnectError(s.log, err)
	}
	infos := make([]*conveyorv1.TaskInfo, len(out))
	for i, t := range out {
		if !t.Existed { // an existing task_id is a no-op
			s.metrics.enqueuedTask(t)
		}
		infos[i] = enqueuedInfo(t, req.Msg.GetBrief())
	}
	return connect.NewResponse(&conveyorv1.EnqueueTxResponse{Tasks: infos}), nil
}

func (s *taskService) GetTask(ctx context.Context, req *connect.Request[conveyorv1.GetTaskRequest]) (*connect.Response[conveyorv1.TaskInfo], error) {
	if req.Msg.GetId() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("id is required"))
	}
	t, err := s.broker.GetTask(ctx, req.Msg.GetId())
	if err != nil {
		return nil, wire.ConnectError(s.log, err)
	}
	return connect.NewResponse(taskInfo(t, s.hub.AttemptID)), nil
}

// enqueuedInfo is the TaskInfo an enqueue answers with; brief leaves out
// the bytes the producer sent (EnqueueBatchRequest.brief). The
// dependencies stay: they carry their states.
func enqueuedInfo(t *broker.Task, brief bool) *conveyorv1.TaskInfo {
	info := taskInfo(t, nil)
	if brief {
		info.Payload, info.Metadata, info.Options = nil, nil, nil
	}
	return info
}
