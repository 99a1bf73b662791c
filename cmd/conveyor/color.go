package main

import (
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// Colour on a terminal. Tables colour their header and the cells that
// carry a state; nothing else is coloured, and nothing is when the output
// is not a terminal (a pipe, a file, --json), when NO_COLOR is set to
// anything (no-color.org), or when TERM is "dumb". CLICOLOR_FORCE set to
// anything but 0 colours even a pipe (for `less -R`), unless NO_COLOR is
// set: the user's refusal wins.

// style is an SGR sequence's parameters ("1" bold, "32" green); "" none.
type style string

const (
	styleNone   style = ""
	styleHeader style = "1"
	styleGood   style = "32" // completed, a live yes
	styleWarn   style = "33" // retry, scheduled, paused
	styleBad    style = "31" // archived, failed
	styleActive style = "36" // active
	styleDim    style = "2"  // canceled
)

// paint wraps text in st's escape sequence; text is already made safe for
// a terminal (safeText), so it holds no escape of its own.
func paint(st style, text string) string {
	if st == styleNone || text == "" {
		return text
	}
	return "\x1b[" + string(st) + "m" + text + "\x1b[0m"
}

// colorFor says whether output to w gets colour.
func colorFor(w io.Writer) bool {
	if os.Getenv("NO_COLOR") != "" {
		return false
	}
	if v, ok := os.LookupEnv("CLICOLOR_FORCE"); ok && v != "0" {
		return true
	}
	if os.Getenv("TERM") == "dumb" {
		return false
	}
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// stateStyle is the colour of a task state's name (as stateName writes
// it).
func stateStyle(state string) style {
	switch strings.ToLower(state) {
	case "completed":
		return styleGood
	case "active":
		return styleActive
	case "retry", "scheduled", "aggregating", "blocked":
		return styleWarn
	case "archived":
		return styleBad
	case "canceled":
		return styleDim
	}
	return styleNone
}
