package main

import (
	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// queuePauseCmd is `conveyor queue pause QUEUE`.
type queuePauseCmd struct {
	clientFlags

	Queue string `arg:"" complete:"queue" help:"Queue name."`
}

// Run pauses the queue and prints it. Pausing a paused queue is not an
// error: the command says what the queue is now.
func (c *queuePauseCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	res, err := cn.admin.PauseQueue(ctx, connect.NewRequest(&conveyorv1.PauseQueueRequest{Queue: c.Queue}))
	if err != nil {
		return err
	}
	return c.printQueue(k.Stdout, res.Msg)
}
