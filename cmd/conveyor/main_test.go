package main

import (
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine outlives the tests. It prints
// times in UTC, whatever the machine's zone, so that golden files match
// everywhere.
func TestMain(m *testing.M) {
	time.Local = time.UTC
	goleak.VerifyTestMain(m)
}
