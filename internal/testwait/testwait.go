// Package testwait is the one way Conveyor's tests wait for a condition:
// they poll it, never sleep for an outcome. It has no dependencies of its
// own, so that every package's tests (the SDK's internal ones included)
// can use it.
package testwait

import (
	"testing"
	"time"
)

// Until polls cond every few milliseconds until it holds, failing the test
// if it does not within timeout.
func Until(t testing.TB, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %s: %s", timeout, msg)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
