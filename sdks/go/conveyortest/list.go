package conveyortest

import (
	"context"
	"fmt"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// listPageSize is the largest page ListTasks serves: a test's tasks
// mostly fit in one.
const listPageSize = 1000

// listTasks lists the tasks of queue (of every queue, for ""), in the
// given state (every state, for TASK_STATE_UNSPECIFIED), through the
// AdminService as an operator would see them: queues by name, and each
// queue's tasks in id order, over every page.
func (s *Server) listTasks(ctx context.Context, queue string, state conveyorv1.TaskState) ([]*conveyorv1.TaskInfo, error) {
	queues := []string{queue}
	if queue == "" {
		var err error
		if queues, err = s.queueNames(ctx); err != nil {
			return nil, err
		}
	}
	var all []*conveyorv1.TaskInfo
	for _, q := range queues {
		tasks, err := s.listQueue(ctx, q, state)
		if err != nil {
			return nil, err
		}
		all = append(all, tasks...)
	}
	return all, nil
}

// queueNames lists the server's queues, sorted.
func (s *Server) queueNames(ctx context.Context) ([]string, error) {
	res, err := s.admin.ListQueues(ctx, connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	names := make([]string, len(res.Msg.GetQueues()))
	for i, q := range res.Msg.GetQueues() {
		names[i] = q.GetName()
	}
	return names, nil
}

// listQueue lists the tasks of one queue in state, over every page.
func (s *Server) listQueue(ctx context.Context, queue string, state conveyorv1.TaskState) ([]*conveyorv1.TaskInfo, error) {
	var all []*conveyorv1.TaskInfo
	req := &conveyorv1.ListTasksRequest{Queue: queue, State: state, PageSize: listPageSize}
	for {
		res, err := s.admin.ListTasks(ctx, connect.NewRequest(req))
		if err != nil {
			return nil, fmt.Errorf("list the tasks of queue %q: %w", queue, err)
		}
		all = append(all, res.Msg.GetTasks()...)
		if res.Msg.GetNextPageToken() == "" {
			return all, nil
		}
		req.PageToken = res.Msg.GetNextPageToken()
	}
}
