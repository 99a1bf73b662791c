package conveyor_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine outlives the tests: a worker
// that did not stop, a session stream left open.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
