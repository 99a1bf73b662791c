package sessions

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine outlives the tests (a session's
// reclaim timer, a completions goroutine).
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
