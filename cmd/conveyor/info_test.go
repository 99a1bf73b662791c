package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestInfo checks the embedded engine's figures (its file, its size),
// whatever the test engine.
func TestInfo(t *testing.T) {
	t.Parallel()
	s := servertest.StartBolt(t, server.Config{Token: "tok"})
	addr := "--addr=" + s.URL()
	enqueueID(t, addr, "--token=tok", "t")
	enqueueID(t, addr, "--token=tok", "--process-in", "1h", "t")

	kv := parseListing(t, mustRun(t, "info", addr, "--token=tok"))
	for k, want := range map[string]string{
		"version": server.Version, "storage_engine": "bbolt", "tasks.pending": "1", "tasks.scheduled": "1",
		"tasks.blocked": "0",
	} {
		if kv[k] != want {
			t.Errorf("%s = %q, want %q", k, kv[k], want)
		}
	}
	if !strings.HasSuffix(kv["data_path"], "conveyor.db") || !strings.HasSuffix(kv["file_size"], " bytes)") ||
		!strings.Contains(kv["node"], s.Addr().String()) {
		t.Errorf("info listing: %v", kv)
	}

	var got struct {
		Cluster struct {
			Version string
			Nodes   []struct{ Address string }
		}
		Broker struct {
			Engine     string
			TaskCounts map[string]string
		}
	}
	out := mustRun(t, "info", addr, "--token=tok", "--json")
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("info --json: %v\n%s", err, out)
	}
	if got.Cluster.Version != server.Version || len(got.Cluster.Nodes) != 1 || got.Broker.Engine != "bbolt" ||
		got.Broker.TaskCounts["pending"] != "1" {
		t.Errorf("info --json: %+v", got)
	}
	if !strings.HasPrefix(out, "{\n  \"cluster\": {\n    \"nodes\": [") {
		t.Errorf("info --json is not indented as the rest:\n%s", out)
	}

	if _, err := runCLI(t, "", "info", addr, "--token=bad"); exitCode(err) != exitAuth {
		t.Errorf("info with a wrong token: %v (exit %d)", err, exitCode(err))
	}
}

func TestWorkers(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()
	if out := mustRun(t, "workers", addr, "--json"); out != "[]\n" {
		t.Errorf("no workers: %q", out)
	}
	startWorker(t, s, "w", map[string]string{"zone": "a", "host": "h1", "pid": "42"})
	id := enqueueID(t, addr, "--queue", "w", "hold")
	waitState(t, s, id, "active")

	var workers []struct {
		SessionID   string
		Queues      map[string]int
		Concurrency int
		InFlight    int
		Labels      map[string]string
		SdkVersion  string
		TaskIDs     []string `json:"taskIds"`
		NodeID      string   `json:"nodeId"`
	}
	// The held task is listed once the session's record catches up.
	servertest.Eventually(t, 10*time.Second, "the worker lists its task", func() bool {
		if err := json.Unmarshal([]byte(mustRun(t, "workers", addr, "--json")), &workers); err != nil {
			t.Fatal(err)
		}
		return len(workers) == 1 && len(workers[0].TaskIDs) == 1
	})
	w := workers[0]
	if w.Queues["w"] != 3 || w.Concurrency != 2 || w.InFlight != 1 || w.TaskIDs[0] != id ||
		w.Labels["zone"] != "a" || w.SdkVersion == "" {
		t.Errorf("workers --json: %+v", w)
	}

	lines := strings.Split(strings.TrimSuffix(mustRun(t, "workers", addr), "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "SESSION ") {
		t.Fatalf("workers table:\n%s", strings.Join(lines, "\n"))
	}
	// A NODE column, second, when the server is one of several nodes (on
	// PostgreSQL), and none on the embedded engine.
	if (w.NodeID != "") != (servertest.Engine() == servertest.EnginePostgres) ||
		(strings.Fields(lines[0])[1] == "NODE") != (w.NodeID != "") {
		t.Errorf("node %q on engine %s, table:\n%s", w.NodeID, servertest.Engine(), strings.Join(lines, "\n"))
	}
	for _, cell := range []string{w.SessionID, w.NodeID, " w=3 ", " 2 ", " 1 ", "host=h1, pid=42, zone=a", id} {
		if !strings.Contains(lines[1], cell) {
			t.Errorf("workers row lacks %q:\n%s", cell, lines[1])
		}
	}
}
