package main

import (
	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// cronCreateCmd is `conveyor cron create SPEC TYPE [PAYLOAD]`, with the
// task template's flags as enqueue names them.
type cronCreateCmd struct {
	clientFlags
	cronTemplateFlags

	Spec    string  `arg:"" help:"Schedule: 5 cron fields (6 with seconds first), a descriptor such as @hourly or '@every 1m30s', optionally after CRON_TZ=Area/City."`
	Type    string  `arg:"" help:"Type of the fired tasks."`
	Payload *string `arg:"" optional:"" help:"Payload text; '-' reads it from standard input. Defaults to empty."`
	ID      string  `name:"id" placeholder:"ID" help:"Name the entry (the server assigns a ULID otherwise); an id in use fails with already_exists."`
}

// Run creates the entry and prints it as stored, with its next fire time.
func (c *cronCreateCmd) Run(k *kong.Context, in stdin) error {
	payload, err := readPayload(c.Payload, c.PayloadFile, in)
	if err != nil {
		return err
	}
	cn, err := c.dial()
	if err != nil {
		return err
	}
	e := &conveyorv1.CronEntry{Id: c.ID, Spec: c.Spec, Type: c.Type}
	c.apply(e, payload)
	ctx, cancel := callContext()
	defer cancel()
	res, err := cn.admin.CreateCron(ctx, connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: e}))
	if err != nil {
		return err
	}
	return c.printCron(k.Stdout, res.Msg)
}
