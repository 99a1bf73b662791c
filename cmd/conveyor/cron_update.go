package main

import (
	"connectrpc.com/connect"
	"github.com/alecthomas/kong"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// cronUpdateCmd is `conveyor cron update ID --flag VALUE ...`: it sends
// only the fields the flags name (UpdateCron's update_mask), which the
// server changes in one step, so the other fields keep their values even
// while someone else changes them. The next run moves only with --spec.
type cronUpdateCmd struct {
	clientFlags
	cronTemplateFlags

	ID      string  `arg:"" complete:"cron" help:"Cron entry id."`
	Spec    *string `placeholder:"SPEC" help:"New schedule; the next run is counted from now (without it the next run stays)."`
	Type    *string `placeholder:"TYPE" help:"New type of the fired tasks."`
	Payload *string `placeholder:"TEXT" help:"New payload text ('-' reads it from standard input)."`

	ClearMetadata bool `name:"clear-metadata" xor:"metadata" help:"Remove every metadata entry of the fired tasks."`
}

// Run updates the entry and prints it as stored.
func (c *cronUpdateCmd) Run(k *kong.Context, in stdin) error {
	payload, err := readPayload(c.Payload, c.PayloadFile, in)
	if err != nil {
		return err
	}
	e, mask := c.update(payload)
	if len(mask.GetPaths()) == 0 {
		return usageErrorf("nothing to change: give a flag such as --spec, --type or --payload (conveyor cron get %s shows the entry)", c.ID)
	}
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	res, err := cn.admin.UpdateCron(ctx, connect.NewRequest(&conveyorv1.UpdateCronRequest{Entry: e, UpdateMask: mask}))
	if err != nil {
		return err
	}
	return c.printCron(k.Stdout, res.Msg)
}

// update is the change the flags ask for: the fields they give, and the
// mask that names them.
func (c *cronUpdateCmd) update(payload []byte) (*conveyorv1.CronEntry, *fieldmaskpb.FieldMask) {
	e := &conveyorv1.CronEntry{Id: c.ID}
	mask := &fieldmaskpb.FieldMask{Paths: c.apply(e, payload)}
	if c.Spec != nil {
		e.Spec = *c.Spec
		mask.Paths = append(mask.Paths, "spec")
	}
	if c.ClearMetadata {
		mask.Paths = append(mask.Paths, "metadata")
	}
	if c.Type != nil {
		e.Type = *c.Type
		mask.Paths = append(mask.Paths, "type")
	}
	return e, mask
}
