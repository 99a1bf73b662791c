package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func TestCompact(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := servertest.StartBolt(t, server.Config{DataDir: dir})
	addr := "--addr=" + s.URL()
	// Fill the file, then free most of it.
	tasks := make([]*conveyor.Task, 500)
	for i := range tasks {
		tasks[i] = conveyor.NewTask("t", []byte(strings.Repeat("x", 8<<10)), conveyor.Queue("q"))
	}
	if _, err := sdkClient(t, s).EnqueueBatch(context.Background(), tasks); err != nil {
		t.Fatal(err)
	}
	kept := enqueueID(t, addr, "--content-type", "text/plain", "--queue", "kept", "t", "still here")
	mustRun(t, "task", "delete", addr, "--queue", "q", "--state", "pending")

	// A running server holds the file.
	_, err := runCLI(t, "", "compact", "--data-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "in use") || exitCode(err) != exitFailure {
		t.Errorf("compact while the server runs: %v (exit %d)", err, exitCode(err))
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	path := filepath.Join(dir, server.DataFile)
	before := fileSize(t, path)
	var res struct {
		BytesBefore, BytesAfter int64
		Backup                  string
	}
	if err := json.Unmarshal([]byte(mustRun(t, "compact", "--data-dir", dir, "--json")), &res); err != nil {
		t.Fatal(err)
	}
	after := fileSize(t, path)
	if res.BytesBefore != before || res.BytesAfter != after || after >= before/2 || res.Backup != path+".bak" {
		t.Errorf("compact: %+v; sizes %d -> %d", res, before, after)
	}
	if fileSize(t, path+".bak") != before {
		t.Errorf("the old file was not kept as conveyor.db.bak")
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, "*.compact-*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}

	// A second compact will not overwrite the kept file; --no-backup
	// keeps none.
	if _, err := runCLI(t, "", "compact", "--data-dir", dir); err == nil || !strings.Contains(err.Error(), "--no-backup") {
		t.Errorf("compact with a .bak in the way: %v", err)
	}
	out := mustRun(t, "compact", "--data-dir", dir, "--no-backup")
	if !strings.HasPrefix(out, "compacted "+path+": ") || strings.Contains(out, ".bak") {
		t.Errorf("compact --no-backup printed %q", out)
	}

	// The compacted file serves.
	r := servertest.StartBolt(t, server.Config{DataDir: dir})
	if kv := parseListing(t, mustRun(t, "task", "get", "--addr", r.URL(), kept)); kv["payload"] != "still here" {
		t.Errorf("after compact: %v", kv)
	}

	if _, err := runCLI(t, "", "compact", "--data-dir", filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("compact of a missing directory: %v", err)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
