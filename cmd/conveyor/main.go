// Command conveyor is the Conveyor task-queue server and its command-line
// client. Each subcommand lives in its own file.
package main

import (
	"os"

	"github.com/alecthomas/kong"
)

// cli is the command tree. Every flag also reads CONVEYOR_<FLAG> from the
// environment (kong's env tags).
type cli struct {
	Server  serverCmd  `cmd:"" help:"Run the Conveyor server."`
	Enqueue enqueueCmd `cmd:"" help:"Enqueue a task."`
	Task    taskCmd    `cmd:"" help:"Inspect tasks."`
	Bench   benchCmd   `cmd:"" help:"Run a benchmark workload against a fresh server (or --addr)."`
	Version versionCmd `cmd:"" help:"Print the version."`
}

func main() {
	var c cli
	ctx := kong.Parse(&c,
		kong.Name("conveyor"),
		kong.Description("Conveyor: a durable task queue on one binary."),
		kong.UsageOnError(),
		serverDefaults(),
	)
	if err := ctx.Run(); err != nil {
		ctx.Errorf("%v", err)
		os.Exit(1)
	}
}
