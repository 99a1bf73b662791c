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
	words, cands, done := skipGlobalFlags(words)
	if done {
		return cands
	}
	node, cur := root, words[len(words)-1]
	var pending *kong.Flag // a flag whose value is the next word
	positionals := 0
	for _, w := range words[:len(words)-1] {
		switch {
		case pending != nil:
			pending = nil
		case strings.HasPrefix(w, "-") && w != "-":
			name, _, hasValue := strings.Cut(w, "=")
			if f := findFlag(node, name); f != nil && !f.IsBool() && !f.IsCounter() && !hasValue {
				pending = f
			}
		default:
			if child := findChild(node, w); child != nil && positionals == 0 {
				node = child
			} else {
				positionals++
			}
		}
	}
	if pending != nil {
		return values(pending.Value, "", cur)
	}
	if name, v, ok := strings.Cut(cur, "="); ok && strings.HasPrefix(name, "--") {
		if f := findFlag(node, name); f != nil {
			return values(f.Value, name+"=", v)
		}
		return nil
	}
	if strings.HasPrefix(cur, "-") {
		var out []string
		if node == root {
			for name := range globalFlagNames {
				out = append(out, "--"+name)
			}
		}
		for _, group := range node.AllFlags(true) {
			for _, f := range group {
				out = append(out, "--"+f.Name)
			}
		}
		return matching(out, "", cur)
	}
	if positionals == 0 {
		var out []string
		for _, child := range node.Children {
			if !child.Hidden {
				out = append(out, child.Name)
			}
		}
		if len(out) > 0 {
			return matching(out, "", cur)
		}
	}
	if positionals < len(node.Positional) {
		return values(node.Positional[positionals], "", cur)
	}
	if n := len(node.Positional); n > 0 && node.Positional[n-1].IsSlice() {
		return values(node.Positional[n-1], "", cur)
	}
	return nil
}

// values are the candidates for a value of v: its enum, or files for a
// path; nothing for a free value.
func values(v *kong.Value, prefix, cur string) []string {
	if v.Enum != "" {
		return matching(v.EnumSlice(), prefix, cur)
	}
	if v.Tag != nil && (v.Tag.Type == "path" || v.Tag.Type == "existingfile" || v.Tag.Type == "existingdir") {
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
// parseArgs), keeping the word being completed. When that word is the
// value of one of them, done is true and cands are its candidates: files
// for --token-file, nothing for a free value.
func skipGlobalFlags(words []string) (rest, cands []string, done bool) {
	last := len(words) - 1
	i := 0
	for i < last {
		name, _, hasValue := strings.Cut(strings.TrimPrefix(words[i], "--"), "=")
		takesValue, known := globalFlagNames[name]
		if !strings.HasPrefix(words[i], "--") || !known {
			break
		}
		i++
		if !takesValue || hasValue {
			continue
		}
		if i == last {
			if name == "token-file" {
				return nil, []string{pathCandidate}, true
			}
			return nil, nil, true
		}
		i++
	}
	return words[i:], nil, false
}
