package main

import (
	"github.com/alecthomas/kong"
)

// taskCmd groups the commands on one task.
type taskCmd struct {
	Get taskGetCmd `cmd:"" help:"Show one task."`
}

// taskGetCmd is `conveyor task get ID`.
type taskGetCmd struct {
	clientFlags

	ID string `arg:"" help:"Task id (a ULID)."`
}

// Run looks the task up and prints it.
func (c *taskGetCmd) Run(k *kong.Context) error {
	client, err := c.client()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	info, err := client.GetTask(ctx, c.ID)
	if err != nil {
		return err
	}
	return c.printTask(k.Stdout, info)
}
