package main

import (
	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// queueLsCmd is `conveyor queue ls`.
type queueLsCmd struct {
	clientFlags

	Wide bool `help:"Show every count (aggregating, blocked, completed, canceled, and the enqueued and processed totals), not only those that fit 100 columns."`
}

// Run lists every queue the server knows, sorted by name.
func (c *queueLsCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	res, err := cn.admin.ListQueues(ctx, connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
	if err != nil {
		return err
	}
	if c.JSON {
		return writeJSONList(k.Stdout, res.Msg.GetQueues())
	}
	if len(res.Msg.GetQueues()) == 0 {
		return writef(k.Stdout, "no queues\n")
	}
	return queueTable(k.Stdout, res.Msg.GetQueues(), c.Wide)
}
