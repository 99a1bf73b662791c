package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
