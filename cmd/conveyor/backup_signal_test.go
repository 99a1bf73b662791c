//go:build unix

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// backupChildEnv makes the test binary, run as a child by
// TestBackupInterrupted, a `conveyor backup` to the file it names (after a
// space, the server's URL) that pauses before its copy until it gets
// SIGTERM.
const backupChildEnv = "CONVEYOR_TEST_BACKUP_CHILD"

// backupChildPaused is the line the child prints once it is paused.
const backupChildPaused = "backup child: copying"

// runBackupChild is the child's main when backupChildEnv is set: it
// returns false otherwise.
func runBackupChild() bool {
	file, addr, ok := strings.Cut(os.Getenv(backupChildEnv), " ")
	if !ok {
		return false
	}
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	beforeBackupCopy = func() {
		fmt.Fprintln(os.Stderr, backupChildPaused)
		<-terms // backup's own handler gets it as well
	}
	os.Args = []string{"conveyor", "backup", "--addr", addr, file}
	main()
	return true
}

// TestBackupInterrupted: a backup sent SIGTERM while it copies removes its
// temporary file, exits 1 saying it was interrupted, and writes no FILE.
func TestBackupInterrupted(t *testing.T) {
	t.Parallel()
	s := servertest.StartBolt(t, server.Config{})
	enqueueID(t, "--addr="+s.URL(), "--queue", "q", "t", "1")
	dir := t.TempDir()
	file := filepath.Join(dir, "backup.db")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), backupChildEnv+"="+file+" "+s.URL())
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var out bytes.Buffer
	for sc.Scan() && sc.Text() != backupChildPaused {
		out.WriteString(sc.Text() + "\n")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 1 {
		t.Errorf("the paused backup's files: %v, want its temporary file", left)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitFailure || !strings.Contains(out.String(), "backup interrupted") {
		t.Errorf("the interrupted backup: %v; stderr:\n%s", err, out.String())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
		t.Errorf("the interrupted backup left %v", left)
	}
}
