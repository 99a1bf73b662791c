package main

import (
	"context"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// taskCancelCmd is `conveyor task cancel ID...` (or --queue Q --state S):
// a waiting task becomes canceled at once; a running one stays active, its
// worker is told to stop, and the worker's answer decides how it ends.
type taskCancelCmd struct {
	taskActionFlags
}

// Run cancels the tasks.
func (c *taskCancelCmd) Run(k *kong.Context, in stdin) error {
	return c.run(k, in, cancelAction)
}

var cancelAction = taskAction{
	verb: "cancel",
	bulk: conveyorv1.TaskAction_TASK_ACTION_CANCEL,
	one: func(ctx context.Context, cn *conn, id string) (*conveyorv1.TaskInfo, error) {
		res, err := cn.admin.CancelTask(ctx, connect.NewRequest(&conveyorv1.CancelTaskRequest{Id: id}))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	},
	batch: func(ctx context.Context, cn *conn, ids []string) ([]*conveyorv1.BatchTaskResult, error) {
		res, err := cn.admin.BatchCancelTasks(ctx, connect.NewRequest(&conveyorv1.BatchCancelTasksRequest{Ids: ids}))
		if err != nil {
			return nil, err
		}
		return res.Msg.GetResults(), nil
	},
}
