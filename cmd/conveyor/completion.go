package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/alecthomas/kong"
)

// completionCmd is `conveyor completion bash|zsh|fish`: prints a script
// that makes the shell complete conveyor's commands, flags and flag values.
//
// Each script is a few lines that ask the binary itself (the hidden
// `__complete` command) for candidates, so completion always matches the
// command tree of the binary installed: there is nothing to regenerate.
type completionCmd struct {
	Shell string `arg:"" enum:"bash,zsh,fish" help:"Shell: bash, zsh or fish."`
}

// Run prints the script for the shell.
func (c *completionCmd) Run(k *kong.Context) error {
	_, err := io.WriteString(k.Stdout, completionScripts[c.Shell])
	return err
}

// completeCmd is `conveyor __complete -- WORD...`: what the completion
// scripts call. The words are those after the program's name up to the
// cursor, the last one the word being completed ("" for a new one).
type completeCmd struct {
	Words []string `arg:"" optional:"" passthrough:""`
}

// pathCandidate is the one line __complete prints when the word is a file
// name: the script then lets the shell complete files.
const pathCandidate = ":path"

// Run prints one candidate per line.
func (c *completeCmd) Run(k *kong.Context) error {
	words := c.Words
	if len(words) > 0 && words[0] == "--" {
		words = words[1:]
	}
	if len(words) == 0 {
		words = []string{""}
	}
	for _, cand := range complete(k.Model.Node, words) {
		if _, err := fmt.Fprintln(k.Stdout, cand); err != nil {
			return err
		}
	}
	return nil
}

// complete returns the candidates for the last of words: the node the
// earlier words select, walked as kong would parse them, decides between
// its subcommands, its flags, and the values of the flag before.
func complete(root *kong.Node, words []string) []string {
	global, words, cands, done := skipGlobalFlags(words)
	if done {
		return cands
	}
	c := &completion{root: root, node: root, cur: words[len(words)-1], global: global, given: map[string]string{}}
	return c.candidates(c.walk(words[:len(words)-1]))
}

// completion is what the words before the one being completed say: the
// command they select, the flags and arguments they give it. The values
// from the server (completion_server.go) need them: the connection flags
// to call it, and --queue to narrow a task id.
type completion struct {
	root, node *kong.Node
	cur        string            // the word being completed
	global     map[string]string // connection flags before the command, by name
	given      map[string]string // flags after it, by name: the last value
	args       []string          // positional arguments, in order
}

// walk follows words down the command tree, noting flags and arguments;
// it returns the flag whose value the word being completed is, if any.
func (c *completion) walk(words []string) *kong.Flag {
	var pending *kong.Flag
	for _, w := range words {
		switch {
		case pending != nil:
			c.given[pending.Name] = w
			pending = nil
		case strings.HasPrefix(w, "-") && w != "-":
			name, v, hasValue := strings.Cut(w, "=")
			f := findFlag(c.node, name)
			switch {
			case f == nil || f.IsBool() || f.IsCounter():
			case hasValue:
				c.given[f.Name] = v
			default:
				pending = f
			}
		default:
			if child := findChild(c.node, w); child != nil && len(c.args) == 0 {
				c.node = child
			} else {
				c.args = append(c.args, w)
			}
		}
	}
	return pending
}

// candidates are those for c.cur: the value of pending when it is a
// flag's, else a flag's name, a subcommand or a positional argument.
func (c *completion) candidates(pending *kong.Flag) []string {
	cur := c.cur
	if pending != nil {
		return c.values(pending.Value, "", cur)
	}
	if name, v, ok := strings.Cut(cur, "="); ok && strings.HasPrefix(name, "--") {
		if f := findFlag(c.node, name); f != nil {
			return c.values(f.Value, name+"=", v)
		}
		return nil
	}
	if strings.HasPrefix(cur, "-") {
		return matching(c.flagNames(), "", cur)
	}
	if len(c.args) == 0 {
		var out []string
		for _, child := range c.node.Children {
			if !child.Hidden {
				out = append(out, child.Name)
			}
		}
		if len(out) > 0 {
			return matching(out, "", cur)
		}
	}
	pos := c.node.Positional
	if n := len(c.args); n < len(pos) {
		return c.values(pos[n], "", cur)
	}
	if n := len(pos); n > 0 && pos[n-1].IsSlice() {
		return c.values(pos[n-1], "", cur)
	}
	return nil
}

// flagNames are the flags of the command, and at the root the connection
// flags that may come before one.
func (c *completion) flagNames() []string {
	var out []string
	if c.node == c.root {
		for name := range globalFlagNames {
			out = append(out, "--"+name)
		}
	}
	for _, group := range c.node.AllFlags(true) {
		for _, f := range group {
			out = append(out, "--"+f.Name)
		}
	}
	return out
}

// values are the candidates for a value of v: its enum; names from the
// server when it is tagged complete:"KIND" (completion_server.go); files
// for a path; nothing for a free value.
func (c *completion) values(v *kong.Value, prefix, cur string) []string {
	if v.Enum != "" {
		return matching(v.EnumSlice(), prefix, cur)
	}
	if v.Tag == nil {
		return nil
	}
	if kind := v.Tag.Get("complete"); kind != "" {
		return matching(c.fromServer(kind), prefix, cur)
	}
	if v.Tag.Type == "path" || v.Tag.Type == "existingfile" || v.Tag.Type == "existingdir" {
		return []string{pathCandidate}
	}
	if f := v.Flag; f != nil && (f.PlaceHolder == "FILE" || f.PlaceHolder == "DIR") {
		return []string{pathCandidate}
	}
	return nil
}

// matching is the candidates that start with cur, each after prefix,
// sorted; an empty enum value is no candidate.
func matching(cands []string, prefix, cur string) []string {
	var out []string
	for _, c := range cands {
		if c != "" && strings.HasPrefix(c, cur) {
			out = append(out, prefix+c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// findFlag is the flag named by w ("--name" or "-x") on node or a parent.
func findFlag(node *kong.Node, w string) *kong.Flag {
	long, isLong := strings.CutPrefix(w, "--")
	for _, group := range node.AllFlags(false) {
		for _, f := range group {
			if isLong && (f.Name == long || slices.Contains(f.Aliases, long)) {
				return f
			}
			if !isLong && f.Short != 0 && w == "-"+string(f.Short) {
				return f
			}
		}
	}
	return nil
}

func findChild(node *kong.Node, w string) *kong.Node {
	for _, child := range node.Children {
		if child.Name == w || slices.Contains(child.Aliases, w) {
			return child
		}
	}
	return nil
}

// skipGlobalFlags drops the connection flags before the command (see
// parseArgs), keeping the word being completed, and returns their values
// by name. When that word is the value of one of them, done is true and
// cands are its candidates: files for --token-file, nothing for a free
// value.
func skipGlobalFlags(words []string) (global map[string]string, rest, cands []string, done bool) {
	global = map[string]string{}
	last := len(words) - 1
	i := 0
	for i < last {
		name, value, hasValue := strings.Cut(strings.TrimPrefix(words[i], "--"), "=")
		takesValue, known := globalFlagNames[name]
		if !strings.HasPrefix(words[i], "--") || !known {
			break
		}
		i++
		if !takesValue || hasValue {
			global[name] = value
			continue
		}
		if i == last {
			if name == "token-file" {
				return nil, nil, []string{pathCandidate}, true
			}
			return nil, nil, nil, true
		}
		global[name] = words[i]
		i++
	}
	return global, words[i:], nil, false
}
