package main

import (
	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// cronResumeCmd is `conveyor cron resume ID`.
type cronResumeCmd struct {
	clientFlags

	ID string `arg:"" complete:"cron" help:"Cron entry id."`
}

// Run resumes the entry and prints it.
func (c *cronResumeCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	res, err := cn.admin.ResumeCron(ctx, connect.NewRequest(&conveyorv1.ResumeCronRequest{Id: c.ID}))
	if err != nil {
		return err
	}
	return c.printCron(k.Stdout, res.Msg)
}
