package main

import (
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine outlives the tests. It prints
// times in UTC, whatever the machine's zone, so that golden files match
// everywhere, and removes the binary buildBinary compiled. Run as a
// child process by a test, it is that child instead (childMain).
func TestMain(m *testing.M) {
	if childMain() {
		os.Exit(0)
	}
	time.Local = time.UTC
	goleak.VerifyTestMain(cleanupM{m, func() {
		if binDir != "" {
			_ = os.RemoveAll(binDir)
		}
	}})
}

// cleanupM runs the tests, then cleanup.
type cleanupM struct {
	m       *testing.M
	cleanup func()
}

func (c cleanupM) Run() int {
	defer c.cleanup()
	return c.m.Run()
}
