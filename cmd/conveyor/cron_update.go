package main

import (
	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// cronUpdateCmd is `conveyor cron update ID [--flag VALUE ...]`. UpdateCron
// replaces a whole entry, so the command reads it, changes what the flags
// say and writes it back: fields without a flag keep their values.
type cronUpdateCmd struct {
	clientFlags
	cronTemplateFlags

	ID      string  `arg:"" help:"Cron entry id."`
	Spec    *string `placeholder:"SPEC" help:"New schedule."`
	Type    *string `placeholder:"TYPE" help:"New type of the fired tasks."`
	Payload *string `placeholder:"TEXT" help:"New payload text ('-' reads it from standard input)."`
}

// Run updates the entry and prints it as stored.
func (c *cronUpdateCmd) Run(k *kong.Context, in stdin) error {
	payload, err := readPayload(c.Payload, c.PayloadFile, in)
	if err != nil {
		return err
	}
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
	e := res.Msg
	if c.Spec != nil {
		e.Spec = *c.Spec
	}
	if c.Type != nil {
		e.Type = *c.Type
	}
	c.apply(e, payload)
	res, err = cn.admin.UpdateCron(ctx, connect.NewRequest(&conveyorv1.UpdateCronRequest{Entry: e}))
	if err != nil {
		return err
	}
	return c.printCron(k.Stdout, res.Msg)
}
