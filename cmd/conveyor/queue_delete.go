package main

import (
	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// queueDeleteCmd is `conveyor queue delete QUEUE`.
type queueDeleteCmd struct {
	clientFlags

	Queue string `arg:"" complete:"queue" help:"Queue name."`
}

// Run forgets the queue. The server refuses (exit 2) a queue that still
// holds tasks or that a cron entry enqueues into, and says what is left;
// an unknown queue exits 3.
func (c *queueDeleteCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	if _, err := cn.admin.DeleteQueue(ctx, connect.NewRequest(&conveyorv1.DeleteQueueRequest{Queue: c.Queue})); err != nil {
		return err
	}
	if c.JSON {
		return writeJSONValue(k.Stdout, struct {
			Queue   string `json:"queue"`
			Deleted bool   `json:"deleted"`
		}{c.Queue, true})
	}
	return writef(k.Stdout, "deleted queue %s\n", c.Queue)
}
