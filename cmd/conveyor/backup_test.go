package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestBackupAndRestore backs up a running server with a token and restores
// the copy as docs/cli.md says: the copy, put in place as conveyor.db of a
// fresh data directory, serves the tasks.
func TestBackupAndRestore(t *testing.T) {
	t.Parallel()
	s := servertest.StartBolt(t, server.Config{Token: "tok"})
	addr := "--addr=" + s.URL()
	id := enqueueID(t, addr, "--token=tok", "--content-type", "text/plain", "--queue", "q", "t", "kept")

	dir := t.TempDir()
	file := filepath.Join(dir, "backup.db")
	out := mustRun(t, "backup", addr, "--token=tok", file)
	if !strings.HasPrefix(out, "wrote "+file+": ") {
		t.Errorf("backup printed %q", out)
	}
	if left := tempFiles(t, file); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	// Without the token: exit 4, and no file.
	missing := filepath.Join(dir, "none.db")
	if _, err := runCLI(t, "", "backup", addr, "--token=", missing); exitCode(err) != exitAuth || !strings.Contains(err.Error(), "401") {
		t.Errorf("backup without the token: %v (exit %d)", err, exitCode(err))
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("%s exists after a refused backup", missing)
	}
	if left := tempFiles(t, missing); len(left) != 0 {
		t.Errorf("a refused backup left %v", left)
	}

	// An existing file stays unless --force.
	before, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "", "backup", addr, "--token=tok", file); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("backup over an existing file: %v", err)
	}
	enqueueID(t, addr, "--token=tok", "--content-type", "text/plain", "--queue", "q", "t", "later")
	var summary struct {
		File  string
		Bytes int64
	}
	if err := json.Unmarshal([]byte(mustRun(t, "backup", addr, "--token=tok", "--json", "--force", file)), &summary); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(file)
	if err != nil || summary.File != file || summary.Bytes != fi.Size() || summary.Bytes < int64(len(before)) {
		t.Errorf("backup --json %+v; the file: %v, %v", summary, fi, err)
	}

	if _, err := runCLI(t, "", "backup", "--addr", closedAddr(t), filepath.Join(dir, "x.db")); exitCode(err) != exitUnavailable {
		t.Errorf("backup with no server: %v (exit %d)", err, exitCode(err))
	}

	// Restore: the backup as conveyor.db of a new data directory.
	data := t.TempDir()
	copyFile(t, file, filepath.Join(data, server.DataFile))
	r := servertest.StartBolt(t, server.Config{DataDir: data})
	if kv := parseListing(t, mustRun(t, "task", "get", "--addr", r.URL(), id)); kv["payload"] != "kept" {
		t.Errorf("the restored task: %v", kv)
	}
	if ids := listIDs(t, mustRun(t, "task", "ls", "--addr", r.URL(), "--queue", "q", "--json")); len(ids) != 2 {
		t.Errorf("the restored queue holds %d tasks, want 2", len(ids))
	}
}

// tempFiles is what backups to file left beside it: its temporary files
// (FILE.tmp-*).
func tempFiles(t *testing.T, file string) []string {
	t.Helper()
	left, err := filepath.Glob(file + ".tmp-*")
	if err != nil {
		t.Fatal(err)
	}
	return left
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
