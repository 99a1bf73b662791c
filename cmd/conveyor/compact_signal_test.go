//go:build unix

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// compactChildEnv makes the test binary, run as a child by
// TestCompactInterrupted, a `conveyor compact` of the directory it names
// that pauses before its copy until it gets SIGINT.
const compactChildEnv = "CONVEYOR_TEST_COMPACT_CHILD"

// compactChildPaused is the line the child prints once it is paused.
const compactChildPaused = "compact child: copying"

// runCompactChild is the child's main when compactChildEnv is set: it
// returns false otherwise.
func runCompactChild() bool {
	dir := os.Getenv(compactChildEnv)
	if dir == "" {
		return false
	}
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	beforeCopy = func() {
		fmt.Fprintln(os.Stderr, compactChildPaused)
		<-interrupts // compact's own handler gets it as well
	}
	os.Args = []string{"conveyor", "compact", "--data-dir", dir}
	main()
	return true
}

// TestCompactInterrupted: a compact sent SIGINT while it copies removes
// its partial copy, exits 1 saying it was interrupted, and leaves the
// store as it was, every task in it.
func TestCompactInterrupted(t *testing.T) {
	t.Parallel()
	dir := stoppedServerDir(t)
	path := filepath.Join(dir, server.DataFile)
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), compactChildEnv+"="+dir)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var out bytes.Buffer
	for sc.Scan() && sc.Text() != compactChildPaused {
		out.WriteString(sc.Text() + "\n")
	}
	if copies, _ := filepath.Glob(path + ".compact-*"); len(copies) != 1 {
		t.Errorf("the paused compact's copies: %v, want one", copies)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != exitFailure ||
		!strings.Contains(out.String(), "compact interrupted") || !strings.Contains(out.String(), "untouched") {
		t.Errorf("the interrupted compact: %v; stderr:\n%s", err, out.String())
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 1 {
		t.Errorf("the interrupted compact left %v, want only %s", left, server.DataFile)
	}
	if now, err := os.ReadFile(path); err != nil || !bytes.Equal(now, before) {
		t.Errorf("the interrupted compact changed the store (%v)", err)
	}
	s := servertest.StartBolt(t, server.Config{DataDir: dir})
	admin := conveyorv1connect.NewAdminServiceClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC())
	res, err := admin.ListQueues(context.Background(), connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if qs := res.Msg.GetQueues(); len(qs) != 1 || qs[0].GetPending() != 300 {
		t.Errorf("after the interrupted compact the store holds %v, want 300 pending tasks on q", qs)
	}
}

// TestCompactRemovesStaleCopies: a copy left by a compact that was killed
// (nothing could remove it then) is removed by the next compact, which
// says so, and only once it holds the directory.
func TestCompactRemovesStaleCopies(t *testing.T) {
	t.Parallel()
	dir := stoppedServerDir(t)
	stale := filepath.Join(dir, server.DataFile+".compact-123")
	if err := os.WriteFile(stale, []byte("a partial copy"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(dir) // another compact's lock, as lockDir takes it
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if _, err := runCLI(t, "", "compact", "--data-dir", dir); err == nil {
		t.Error("compact ran while another held the directory")
	}
	if _, err := os.Stat(stale); err != nil {
		t.Errorf("a refused compact removed a copy another compact may be writing: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	_, errOut, err := runCLIFull(t, "", "compact", "--data-dir", dir, "--no-backup")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) || !strings.Contains(errOut, "removed "+stale) {
		t.Errorf("the stale copy after a compact: %v; stderr %q", err, errOut)
	}
}
