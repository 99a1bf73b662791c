package main

import (
	"strconv"
	"strings"

	"github.com/alecthomas/kong"
)

// The connection flags (clientFlags: --addr, --token, --token-file and
// --json) may also come before the command, as asynq's --uri does:
// `conveyor --addr URL queue ls` is `conveyor queue ls --addr URL`.
//
// They cannot be kong flags of the root: kong refuses a flag that a
// command below redefines, and `server` and `bench` have their own --token
// and --addr, which mean something else (the server's own token; the
// server to benchmark). So parseArgs takes them off the front of the
// command line, lets kong parse the rest, then gives them to the command
// selected, when it calls a server; any other command refuses them.

// globalFlagNames are the clientFlags allowed before the command, with
// whether each takes a value.
var globalFlagNames = map[string]bool{"addr": true, "token": true, "token-file": true, "json": false}

// globalFlag is one connection flag given before the command.
type globalFlag struct {
	name  string // without the dashes
	value string // "true" for a bare --json
}

// parseArgs is parser.Parse for a command line that may start with
// connection flags. main, the tests and __complete parse the same way.
func parseArgs(parser *kong.Kong, args []string) (*kong.Context, error) {
	global, rest, err := splitGlobalFlags(args)
	if err != nil {
		return nil, err
	}
	ctx, err := parser.Parse(rest)
	if err != nil || len(global) == 0 {
		return ctx, err
	}
	return ctx, applyGlobalFlags(ctx, global)
}

// splitGlobalFlags takes the connection flags off the front of args, up to
// the first word that is not one: the command, or something kong reports.
func splitGlobalFlags(args []string) ([]globalFlag, []string, error) {
	var global []globalFlag
	for len(args) > 0 {
		name, value, hasValue := strings.Cut(strings.TrimPrefix(args[0], "--"), "=")
		takesValue, known := globalFlagNames[name]
		if !strings.HasPrefix(args[0], "--") || !known {
			break
		}
		args = args[1:]
		switch {
		case !takesValue && !hasValue:
			value = "true"
		case !takesValue:
			if _, err := strconv.ParseBool(value); err != nil {
				return nil, nil, usageErrorf("--%s=%s: want true or false", name, value)
			}
		case !hasValue && len(args) == 0:
			return nil, nil, usageErrorf("--%s needs a value", name)
		case !hasValue:
			value, args = args[0], args[1:]
		}
		global = append(global, globalFlag{name: name, value: value})
	}
	return global, args, nil
}

// connector is a command that calls a server: one that embeds clientFlags.
type connector interface{ connection() *clientFlags }

func (f *clientFlags) connection() *clientFlags { return f }

// applyGlobalFlags sets the connection flags given before the command on
// the command selected. One given after the command as well wins (the
// later flag, as kong does for a repeated one); one given before wins over
// the environment, as any flag does.
func applyGlobalFlags(ctx *kong.Context, global []globalFlag) error {
	cmd := nodeConnector(ctx.Selected())
	if cmd == nil {
		name := "conveyor"
		if node := ctx.Selected(); node != nil {
			name = node.FullPath()
		}
		return usageErrorf("--%s before the command applies to the commands that call a server; `%s` takes its own flags, after its name (see %s --help)",
			global[0].name, name, name)
	}
	f := cmd.connection()
	for _, g := range global {
		if givenAfter(ctx, g.name) {
			continue
		}
		switch g.name {
		case "addr":
			f.Addr = g.value
		case "token":
			f.Token = g.value
		case "token-file":
			f.TokenFile = g.value
		case "json":
			f.JSON, _ = strconv.ParseBool(g.value) // checked by splitGlobalFlags
		}
	}
	return nil
}

// nodeConnector is node's command when it calls a server, else nil.
func nodeConnector(node *kong.Node) connector {
	if node == nil || !node.Target.CanAddr() {
		return nil
	}
	cmd, _ := node.Target.Addr().Interface().(connector)
	return cmd
}

// givenAfter reports whether the flag was on the command line after the
// command (not from the environment or a default).
func givenAfter(ctx *kong.Context, name string) bool {
	for _, p := range ctx.Path {
		if p.Flag != nil && !p.Resolved && p.Flag.Name == name {
			return true
		}
	}
	return false
}
