// Command conveyor is the Conveyor task-queue server and its command-line
// client. Each subcommand lives in its own file.
package main

import (
	"io"
	"os"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/conveyor-dev/conveyor/server"
)

// cli is the command tree. The server's flags also read CONVEYOR_<FLAG>
// from the environment; a client command reads only CONVEYOR_ADDR,
// CONVEYOR_TOKEN and CONVEYOR_TOKEN_FILE, and compact CONVEYOR_DATA_DIR
// (kong's env tags).
type cli struct {
	Server     serverCmd     `cmd:"" help:"Run the Conveyor server."`
	Enqueue    enqueueCmd    `cmd:"" help:"Enqueue a task."`
	Task       taskCmd       `cmd:"" help:"List, inspect and act on tasks."`
	Queue      queueCmd      `cmd:"" help:"List queues, pause and resume them, configure their limits."`
	Cron       cronCmd       `cmd:"" help:"Manage cron entries: tasks enqueued on a schedule."`
	Group      groupCmd      `cmd:"" help:"List the aggregation groups waiting to fire."`
	Workers    workersCmd    `cmd:"" help:"List the connected worker sessions."`
	Release    releaseCmd    `cmd:"" help:"List worker releases, drain one."`
	Info       infoCmd       `cmd:"" help:"Show the server and its storage: version, uptime, data file, task counts."`
	Stats      statsCmd      `cmd:"" help:"Watch queue depths and rates, live (until Ctrl-C)."`
	Backup     backupCmd     `cmd:"" help:"Copy a running server's data file, consistently, into FILE."`
	Compact    compactCmd    `cmd:"" help:"Rewrite a stopped server's data file to give free space back."`
	Migrate    migrateCmd    `cmd:"" help:"Apply the PostgreSQL engine's schema migrations (or show them with --status)."`
	Copy       copyCmd       `cmd:"" help:"Copy a stopped deployment's tasks, queues and cron entries into an empty store of either engine."`
	Completion completionCmd `cmd:"" help:"Print a shell completion script: bash, zsh or fish."`
	Complete   completeCmd   `cmd:"" name:"__complete" hidden:"" help:"Print completion candidates (for the completion scripts)."`
	Bench      benchCmd      `cmd:"" help:"Run a benchmark workload against a fresh server (or --addr)."`
	Version    versionCmd    `cmd:"" help:"Print the version."`
}

// stdin is the standard input that '-' arguments read: a type of its own so
// that kong binds it to Run methods and tests can give their own.
type stdin struct{ io.Reader }

// newParser is the parser main and the tests share, so that they run the
// same command tree with the same defaults and help.
func newParser(c *cli, in io.Reader, opts ...kong.Option) (*kong.Kong, error) {
	return kong.New(c, append([]kong.Option{
		kong.Name("conveyor"),
		kong.Description("Conveyor: a durable task queue on one binary."),
		kong.UsageOnError(),
		kong.Help(helpWithExitCodes),
		serverDefaults(),
		kong.Vars{"default_addr": "http://" + server.DefaultListen, "states": strings.Join(stateNames, ","), "state_list": strings.Join(stateNames, ", ")},
		kong.Bind(stdin{in}),
	}, opts...)...)
}

// helpWithExitCodes is kong's help, with the exit codes after the root's.
func helpWithExitCodes(options kong.HelpOptions, ctx *kong.Context) error {
	if err := kong.DefaultHelpPrinter(options, ctx); err != nil {
		return err
	}
	if ctx.Selected() == nil {
		_, err := io.WriteString(ctx.Stdout, "\n"+globalFlagsHelp+"\n"+exitHelp)
		return err
	}
	return nil
}

// globalFlagsHelp is what the root --help says of the connection flags,
// which kong cannot list there (parseArgs).
const globalFlagsHelp = `Connection flags:
  --addr, --token, --token-file and --json may also come before the command,
  as in "conveyor --addr URL queue ls"; they apply to the commands that call
  a server (see a command's --help).
`

func main() {
	var c cli
	parser, err := newParser(&c, os.Stdin)
	if err != nil {
		panic(err) // a mistake in the command tree's tags
	}
	ctx, err := parseArgs(parser, os.Args[1:])
	parser.FatalIfErrorf(err) // exits with exitUsage
	if err := ctx.Run(); err != nil {
		reportError(ctx, err)
		ctx.Exit(exitCode(err))
	}
}

// reportError prints a command's error on standard error, made safe for a
// terminal: its message may quote the server, or what the server stored.
func reportError(ctx *kong.Context, err error) {
	ctx.Errorf("%s", safeText(err.Error()))
}
