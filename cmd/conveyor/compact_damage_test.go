package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/conveyor-dev/conveyor/internal/filedamage"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestCompactDamagedFile: compact of a damaged file (pages overwritten, or
// the file cut short, as a partial copy leaves it) fails with a message
// that says so and exit 1, rather than crashing bbolt's way, and leaves the
// directory as it found it: the file untouched, no partial copy, no .bak.
func TestCompactDamagedFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, want string
		damage     func(t *testing.T, path string)
	}{
		{"overwritten", "is damaged", filedamage.OverwritePages},
		{"truncated", "is truncated", func(t *testing.T, path string) {
			if err := os.Truncate(path, 4*int64(os.Getpagesize())); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := stoppedServerDir(t)
			path := filepath.Join(dir, server.DataFile)
			tc.damage(t, path)
			damaged, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = runCLI(t, "", "compact", "--data-dir", dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "backup") || exitCode(err) != exitFailure {
				t.Errorf("compact of a damaged file: %v (exit %d), want %q and a hint to restore a backup", err, exitCode(err), tc.want)
			}
			if now, err := os.ReadFile(path); err != nil || !bytes.Equal(now, damaged) {
				t.Errorf("compact changed the damaged file: %v", err)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 1 {
				t.Errorf("compact left %v, want only %s", left, server.DataFile)
			}
		})
	}
}

// stoppedServerDir is the data directory of a server that stored a few
// hundred tasks (enough that each bucket has pages of its own) and stopped.
func stoppedServerDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s := servertest.StartBolt(t, server.Config{DataDir: dir})
	tasks := make([]*conveyor.Task, 300)
	for i := range tasks {
		tasks[i] = conveyor.NewTask("t", []byte(strings.Repeat("x", 1<<10)), conveyor.Queue("q"))
	}
	if _, err := sdkClient(t, s).EnqueueBatch(context.Background(), tasks); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	return dir
}
