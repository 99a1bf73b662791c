package main

import (
	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// cronDeleteCmd is `conveyor cron delete ID`.
type cronDeleteCmd struct {
	clientFlags

	ID string `arg:"" complete:"cron" help:"Cron entry id."`
}

// Run deletes the entry. Tasks it enqueued before stay.
func (c *cronDeleteCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	if _, err := cn.admin.DeleteCron(ctx, connect.NewRequest(&conveyorv1.DeleteCronRequest{Id: c.ID})); err != nil {
		return err
	}
	if c.JSON {
		return writeJSONValue(k.Stdout, struct {
			ID      string `json:"id"`
			Deleted bool   `json:"deleted"`
		}{c.ID, true})
	}
	return writef(k.Stdout, "deleted cron entry %s\n", c.ID)
}
