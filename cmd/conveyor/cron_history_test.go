package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestCronHistory: cron history lists the tasks an entry fired, in fire
// order, leaving out tasks of the same type another entry or a producer
// enqueued; --last bounds it; an unknown entry exits 3.
func TestCronHistory(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()
	mustRun(t, "enqueue", addr, "--queue", "fired", "--metadata", "note=tick", "tick") // same type, not fired
	if out := mustRun(t, "cron", "create", addr, "--id", "tick", "--queue", "fired", "@every 1s", "tick"); out == "" {
		t.Fatal("cron create printed nothing")
	}
	mustRun(t, "cron", "create", addr, "--id", "tock", "--queue", "fired", "@every 1s", "tick")
	type fire struct {
		ID       string
		Metadata map[string]string
	}
	var fired []fire
	servertest.Eventually(t, 20*time.Second, "the entry fires twice", func() bool {
		if err := json.Unmarshal([]byte(mustRun(t, "cron", "history", addr, "--json", "tick")), &fired); err != nil {
			t.Fatal(err)
		}
		return len(fired) >= 2
	})
	mustRun(t, "cron", "pause", addr, "tick")
	mustRun(t, "cron", "pause", addr, "tock")
	for i, f := range fired {
		if f.Metadata["conveyor-cron-id"] != "tick" {
			t.Errorf("fire %d is %s's task: %v", i, f.Metadata["conveyor-cron-id"], f.Metadata)
		}
		if i > 0 && f.Metadata["conveyor-cron-fire"] <= fired[i-1].Metadata["conveyor-cron-fire"] {
			t.Errorf("fires out of order: %v then %v", fired[i-1].Metadata, f.Metadata)
		}
	}
	out := mustRun(t, "cron", "history", addr, "--last", "1", "tick")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 2 || !strings.HasPrefix(lines[0], "FIRE") {
		t.Errorf("cron history --last 1:\n%s", out)
	}
	if _, err := runCLI(t, "", "cron", "history", addr, "nope"); exitCode(err) != exitNotFound {
		t.Errorf("history of an unknown entry: %v (exit %d), want %d", err, exitCode(err), exitNotFound)
	}
}
