package server_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// zoneDir is where the tests' own time zones live (ZONEINFO): a test can
// add a zone, and take it away again, as a system's tzdata would.
var zoneDir string

// TestMain fails the run when a goroutine outlives the tests: a session
// that did not end, a timer loop that did not stop. It points ZONEINFO at
// zoneDir first: Go reads the variable once, at the first zone it loads,
// and looks in the system's zone files for the zones not there.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "conveyor-zones-")
	if err != nil {
		panic(err)
	}
	zoneDir = dir
	if err := os.Setenv("ZONEINFO", dir); err != nil {
		panic(err)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		_ = os.RemoveAll(dir)
		os.Exit(code)
	}))
}
