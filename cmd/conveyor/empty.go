package main

import (
	"fmt"
	"strings"
)

// A listing with nothing to list says so, in words, instead of printing a
// bare header (which reads as a broken command). These build its line;
// with --json an empty list stays "[]".

// inQueue is " in queue Q", or "" for every queue.
func inQueue(queue string) string {
	if queue == "" {
		return ""
	}
	return " in queue " + queue
}

// noTasks is task ls's line for an empty listing, naming its filters:
// "no retrying tasks in queue emails". more says a --page-token was given,
// so the listing started past some tasks.
func noTasks(f taskFilter, more bool) string {
	var b strings.Builder
	b.WriteString("no ")
	if more {
		b.WriteString("more ")
	}
	if st := stateAdjective(f.state); st != "" {
		b.WriteString(st + " ")
	}
	b.WriteString("tasks")
	if f.typ != "" {
		fmt.Fprintf(&b, " of type %s", f.typ)
	}
	if f.group != "" {
		fmt.Fprintf(&b, " in group %s", f.group)
	}
	if f.search != "" {
		fmt.Fprintf(&b, " containing \"%s\"", f.search)
	}
	if f.queue == "" {
		b.WriteString(" in any queue")
	} else {
		b.WriteString(inQueue(f.queue))
	}
	return b.String()
}

// stateAdjective is a state as it reads before "tasks": "retrying tasks";
// "" for every state.
func stateAdjective(state string) string {
	switch state {
	case "", "all":
		return ""
	case "retry":
		return "retrying"
	}
	return state
}
