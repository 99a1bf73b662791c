package main

import (
	"context"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// taskRunCmd is `conveyor task run ID...` (or --queue Q --state S): makes
// scheduled, retrying, blocked, archived or canceled tasks pending now,
// such as every archived task of a queue after a fix.
type taskRunCmd struct {
	taskActionFlags
}

// Run runs the tasks.
func (c *taskRunCmd) Run(k *kong.Context, in stdin) error {
	return c.run(k, in, runAction)
}

var runAction = taskAction{
	verb: "run",
	bulk: conveyorv1.TaskAction_TASK_ACTION_RUN,
	one: func(ctx context.Context, cn *conn, id string) (*conveyorv1.TaskInfo, error) {
		res, err := cn.admin.RunTask(ctx, connect.NewRequest(&conveyorv1.RunTaskRequest{Id: id}))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	},
	batch: func(ctx context.Context, cn *conn, ids []string) ([]*conveyorv1.BatchTaskResult, error) {
		res, err := cn.admin.BatchRunTasks(ctx, connect.NewRequest(&conveyorv1.BatchRunTasksRequest{Ids: ids}))
		if err != nil {
			return nil, err
		}
		return res.Msg.GetResults(), nil
	},
}
