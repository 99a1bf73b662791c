package main

import (
	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// taskGetCmd is `conveyor task get ID`.
type taskGetCmd struct {
	clientFlags

	ID string `arg:"" complete:"task" help:"Task id (a ULID)."`
}

// Run looks the task up and prints it.
func (c *taskGetCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	res, err := cn.tasks.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: c.ID}))
	if err != nil {
		return err
	}
	return c.printTask(k.Stdout, res.Msg)
}
