package main

import (
	"context"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// taskArchiveCmd is `conveyor task archive ID...` (or --queue Q --state S):
// archives tasks that are waiting (neither running nor finished).
type taskArchiveCmd struct {
	taskActionFlags
}

// Run archives the tasks.
func (c *taskArchiveCmd) Run(k *kong.Context, in stdin) error {
	return c.run(k, in, archiveAction)
}

var archiveAction = taskAction{
	verb: "archive",
	bulk: conveyorv1.TaskAction_TASK_ACTION_ARCHIVE,
	one: func(ctx context.Context, cn *conn, id string) (*conveyorv1.TaskInfo, error) {
		res, err := cn.admin.ArchiveTask(ctx, connect.NewRequest(&conveyorv1.ArchiveTaskRequest{Id: id}))
		if err != nil {
			return nil, err
		}
		return res.Msg, nil
	},
	batch: func(ctx context.Context, cn *conn, ids []string) ([]*conveyorv1.BatchTaskResult, error) {
		res, err := cn.admin.BatchArchiveTasks(ctx, connect.NewRequest(&conveyorv1.BatchArchiveTasksRequest{Ids: ids}))
		if err != nil {
			return nil, err
		}
		return res.Msg.GetResults(), nil
	},
}
