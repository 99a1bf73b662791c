package main

import (
	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// cronGetCmd is `conveyor cron get ID`.
type cronGetCmd struct {
	clientFlags

	ID string `arg:"" complete:"cron" help:"Cron entry id."`
}

// Run prints the entry.
func (c *cronGetCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	res, err := cn.admin.GetCron(ctx, connect.NewRequest(&conveyorv1.GetCronRequest{Id: c.ID}))
	if err != nil {
		return err
	}
	return c.printCron(k.Stdout, res.Msg)
}
