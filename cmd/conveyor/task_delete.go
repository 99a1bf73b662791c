package main

import (
	"context"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// taskDeleteCmd is `conveyor task delete ID...` (or --queue Q --state S):
// removes tasks that are not running.
type taskDeleteCmd struct {
	taskActionFlags
}

// Run deletes the tasks.
func (c *taskDeleteCmd) Run(k *kong.Context, in stdin) error {
	return c.run(k, in, deleteAction)
}

var deleteAction = taskAction{
	verb: "delete",
	bulk: conveyorv1.TaskAction_TASK_ACTION_DELETE,
	one: func(ctx context.Context, cn *conn, id string) (*conveyorv1.TaskInfo, error) {
		_, err := cn.admin.DeleteTask(ctx, connect.NewRequest(&conveyorv1.DeleteTaskRequest{Id: id}))
		return nil, err
	},
	batch: func(ctx context.Context, cn *conn, ids []string) ([]*conveyorv1.BatchTaskResult, error) {
		res, err := cn.admin.BatchDeleteTasks(ctx, connect.NewRequest(&conveyorv1.BatchDeleteTasksRequest{Ids: ids}))
		if err != nil {
			return nil, err
		}
		return res.Msg.GetResults(), nil
	},
}
