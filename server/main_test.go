package server_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine outlives the tests: a session
// that did not end, a timer loop that did not stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
