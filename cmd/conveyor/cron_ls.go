package main

import (
	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// cronLsCmd is `conveyor cron ls`.
type cronLsCmd struct {
	clientFlags
}

// Run lists every entry, ordered by id.
func (c *cronLsCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	res, err := cn.admin.ListCrons(ctx, connect.NewRequest(&conveyorv1.ListCronsRequest{}))
	if err != nil {
		return err
	}
	if c.JSON {
		return writeJSONList(k.Stdout, res.Msg.GetEntries())
	}
	if len(res.Msg.GetEntries()) == 0 {
		return writef(k.Stdout, "no cron entries\n")
	}
	return cronTable(k.Stdout, res.Msg.GetEntries())
}
