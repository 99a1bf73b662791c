package admin_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine outlives the tests: a browser
// connection, a worker or a server left running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
