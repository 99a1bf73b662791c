package main

import (
	"fmt"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// groupCmd groups the commands on aggregation groups.
type groupCmd struct {
	Ls groupLsCmd `cmd:"" help:"List the aggregation groups waiting to fire."`
}

// groupLsCmd is `conveyor group ls [--queue Q]`.
type groupLsCmd struct {
	clientFlags

	Queue string `placeholder:"QUEUE" complete:"queue" help:"Only this queue's groups (default: every queue's)."`
}

// Run lists the waiting groups by queue, group and type, with their size
// and when each fires.
func (c *groupLsCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	res, err := cn.admin.ListGroups(ctx, connect.NewRequest(&conveyorv1.ListGroupsRequest{Queue: c.Queue}))
	if err != nil {
		return err
	}
	if c.JSON {
		return writeJSONList(k.Stdout, res.Msg.GetGroups())
	}
	if len(res.Msg.GetGroups()) == 0 {
		return writef(k.Stdout, "no aggregation groups waiting%s\n", inQueue(c.Queue))
	}
	t := newTable(k.Stdout, "QUEUE", "GROUP", "TYPE", "SIZE", "FIRST ENQUEUED", "LAST ENQUEUED", "FIRES AT")
	for _, g := range res.Msg.GetGroups() {
		t.row(g.GetQueue(), g.GetGroup(), g.GetType(), fmt.Sprint(g.GetSize()), showAgo(g.GetFirstEnqueuedAt()),
			showAgo(g.GetLastEnqueuedAt()), showAgo(g.GetFiresAt()))
	}
	return t.flush()
}
