package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestStatsRates renders two made-up samples two seconds apart.
func TestStatsRates(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	prev := &statsSample{at: t0, queues: []*conveyorv1.QueueInfo{
		{Name: "emails", Enqueued: 10, Processed: 4, Failed: 1},
		{Name: "gone", Enqueued: 5},
	}}
	cur := &statsSample{at: t0.Add(2 * time.Second), queues: []*conveyorv1.QueueInfo{
		{Name: "emails", Pending: 7, Active: 2, Retry: 1, Archived: 3, Enqueued: 20, Processed: 10, Failed: 2},
		{Name: "new", Paused: true, Scheduled: 4, Enqueued: 4},
	}}
	var b strings.Builder
	c := statsCmd{Interval: 2 * time.Second}
	if err := c.frame(&b, false, "http://127.0.0.1:7420", prev, cur); err != nil {
		t.Fatal(err)
	}
	golden(t, "stats_frame", b.String())

	b.Reset()
	if err := c.frame(&b, true, "http://127.0.0.1:7420", prev, cur); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), "\x1b[H\x1b[2Jconveyor stats") || strings.HasSuffix(b.String(), "\n\n") {
		t.Errorf("a terminal frame does not redraw the screen:\n%q", b.String())
	}

	b.Reset()
	c.JSON = true
	if err := c.frame(&b, false, "", prev, cur); err != nil {
		t.Fatal(err)
	}
	golden(t, "stats_frame_json", b.String())
}

func TestStats(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()
	enqueueID(t, addr, "--queue", "q", "t")

	out := mustRun(t, "stats", addr, "--once")
	lines := strings.Split(out, "\n")
	if !strings.HasPrefix(lines[0], "conveyor stats  "+s.URL()+"  ") || strings.Contains(lines[0], "Ctrl-C") ||
		!strings.HasPrefix(lines[2], "QUEUE ") ||
		strings.Join(strings.Fields(lines[3]), " ") != "q no 1 0 0 0 0 0 0 - - -" {
		t.Errorf("stats --once:\n%s", out)
	}

	// Two frames: the second has rates; each frame is one JSON line.
	out = mustRun(t, "stats", addr, "--json", "--count", "2", "--interval", "10ms")
	frames := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(frames) != 2 {
		t.Fatalf("--count 2 printed %d lines:\n%s", len(frames), out)
	}
	var f statsFrameJSON
	if err := json.Unmarshal([]byte(frames[1]), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.Queues) != 1 || f.Queues[0].Counts["pending"] != 1 || f.Queues[0].EnqueuedPerSecond == nil ||
		*f.Queues[0].EnqueuedPerSecond != 0 {
		t.Errorf("second frame: %s", frames[1])
	}

	if _, err := runCLI(t, "", "stats", addr, "--count=-1"); exitCode(err) != exitUsage || !strings.Contains(err.Error(), "--count") {
		t.Errorf("--count=-1: %v; want a usage error naming --count", err)
	}
	if _, err := runCLI(t, "", "stats", addr, "--interval", "0s"); exitCode(err) != exitUsage {
		t.Errorf("--interval 0s: %v", err)
	}
	if _, err := runCLI(t, "", "stats", "--addr", closedAddr(t), "--once"); exitCode(err) != exitUnavailable {
		t.Errorf("stats with no server: %v (exit %d)", err, exitCode(err))
	}
}
