package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestQueueHistoryCommand: queue history prints this minute's enqueues,
// per minute and per day, for a queue and for every queue; --json lists
// the points; an unknown queue exits 3.
func TestQueueHistoryCommand(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()
	if out := mustRun(t, "queue", "history", addr); !strings.Contains(out, "no queues yet") {
		t.Errorf("history before any queue:\n%s", out)
	}
	for range 3 {
		mustRun(t, "enqueue", addr, "--queue", "hist", "t")
	}
	mustRun(t, "enqueue", addr, "--queue", "other", "t")
	for _, args := range [][]string{{"hist"}, {"hist", "--days"}, {}} {
		out := mustRun(t, append([]string{"queue", "history", addr}, args...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		want := "3"
		if len(args) == 0 {
			want = "4"
		}
		if f := strings.Fields(lines[len(lines)-1]); len(lines) < 2 || !strings.Contains(lines[0], "ENQUEUED") || f[len(f)-3] != want {
			t.Errorf("queue history %v: want %s enqueued in the last row:\n%s", args, want, out)
		}
	}
	var points []struct {
		Start    string `json:"start"`
		Enqueued string `json:"enqueued"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "queue", "history", addr, "--json", "hist")), &points); err != nil ||
		len(points) == 0 || points[len(points)-1].Enqueued != "3" || points[len(points)-1].Start == "" {
		t.Errorf("queue history --json: %+v, %v", points, err)
	}
	if _, err := runCLI(t, "", "queue", "history", addr, "nope"); exitCode(err) != exitNotFound {
		t.Errorf("history of an unknown queue: %v (exit %d), want exit %d", err, exitCode(err), exitNotFound)
	}
}
