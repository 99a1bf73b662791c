package main

import (
	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// cronPauseCmd is `conveyor cron pause ID`.
type cronPauseCmd struct {
	clientFlags

	ID string `arg:"" complete:"cron" help:"Cron entry id."`
}

// Run pauses the entry (it fires no more until resumed) and prints it.
func (c *cronPauseCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	res, err := cn.admin.PauseCron(ctx, connect.NewRequest(&conveyorv1.PauseCronRequest{Id: c.ID}))
	if err != nil {
		return err
	}
	return c.printCron(k.Stdout, res.Msg)
}
