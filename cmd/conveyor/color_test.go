package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

var sgr = regexp.MustCompile("\x1b\\[[0-9;]*m")

// TestColor: CLICOLOR_FORCE colours the header bold and a state by its
// kind, and the columns line up exactly as without colour; NO_COLOR
// wins; a pipe gets none; --json never does. (Not parallel: it sets the
// environment.)
func TestColor(t *testing.T) {
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()
	const id = "01KBT00000000000000000C0A7"
	mustRun(t, "enqueue", addr, "--queue", "paint", "--task-id", id, "t")
	mustRun(t, "task", "cancel", addr, id)
	mustRun(t, "enqueue", addr, "--queue", "paint", "t")
	mustRun(t, "queue", "pause", addr, "paint")
	plain := mustRun(t, "task", "ls", addr, "--queue", "paint")
	if sgr.MatchString(plain) {
		t.Fatalf("a pipe got colour:\n%q", plain)
	}

	t.Setenv("CLICOLOR_FORCE", "1")
	colored := mustRun(t, "task", "ls", addr, "--queue", "paint")
	if !strings.Contains(colored, "\x1b[1mID\x1b[0m") || !strings.Contains(colored, "\x1b[2mcanceled\x1b[0m") {
		t.Errorf("forced colour: no bold header or dim canceled state:\n%q", colored)
	}
	if got := sgr.ReplaceAllString(colored, ""); got != plain {
		t.Errorf("colour moved the columns:\n%s\nwant\n%s", got, plain)
	}
	if q := mustRun(t, "queue", "ls", addr); !strings.Contains(q, "\x1b[33myes\x1b[0m") {
		t.Errorf("a paused queue's PAUSED is not marked:\n%q", q)
	}
	if j := mustRun(t, "task", "ls", addr, "--queue", "paint", "--json"); sgr.MatchString(j) {
		t.Errorf("--json got colour")
	}

	t.Setenv("NO_COLOR", "1")
	if out := mustRun(t, "task", "ls", addr, "--queue", "paint"); out != plain {
		t.Errorf("NO_COLOR did not win over CLICOLOR_FORCE:\n%q", out)
	}
}
