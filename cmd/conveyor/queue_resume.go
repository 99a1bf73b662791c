package main

import (
	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// queueResumeCmd is `conveyor queue resume QUEUE`.
type queueResumeCmd struct {
	clientFlags

	Queue string `arg:"" complete:"queue" help:"Queue name."`
}

// Run resumes the queue and prints it.
func (c *queueResumeCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	res, err := cn.admin.ResumeQueue(ctx, connect.NewRequest(&conveyorv1.ResumeQueueRequest{Queue: c.Queue}))
	if err != nil {
		return err
	}
	return c.printQueue(k.Stdout, res.Msg)
}
