//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/conveyor-dev/conveyor/server"
)

// TestCompactRefusesASecondCompact: while a compact holds its data
// directory, another compact of it is refused at once and touches
// nothing; once the first ends, a compact runs.
func TestCompactRefusesASecondCompact(t *testing.T) {
	t.Parallel()
	dir := stoppedServerDir(t)
	before, err := os.ReadFile(filepath.Join(dir, server.DataFile))
	if err != nil {
		t.Fatal(err)
	}
	// The first compact's lock, as lockDir takes it.
	d, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	_, err = runCLI(t, "", "compact", "--data-dir", dir)
	if err == nil || !strings.Contains(err.Error(), "another conveyor compact is running") || exitCode(err) != exitFailure {
		t.Errorf("compact while another holds the directory: %v (exit %d)", err, exitCode(err))
	}
	if now, err := os.ReadFile(filepath.Join(dir, server.DataFile)); err != nil || string(now) != string(before) {
		t.Errorf("the refused compact changed the data file (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, server.DataFile+".bak")); !os.IsNotExist(err) {
		t.Errorf("the refused compact left a .bak: %v", err)
	}
	if err := d.Close(); err != nil { // the first compact ends
		t.Fatal(err)
	}
	if _, err := runCLI(t, "", "compact", "--data-dir", dir); err != nil {
		t.Errorf("compact once the directory is free: %v", err)
	}
}
