package bench

import (
	"slices"
	"testing"
)

// A fresh server runs on its defaults and the bench's flags: the
// CONVEYOR_* settings of the shell that runs the bench do not reach it.
func TestServerEnvDropsConveyorSettings(t *testing.T) {
	got := serverEnv([]string{"PATH=/usr/bin", "CONVEYOR_LEASE_TTL=1s", "HOME=/root", "CONVEYOR_TOKEN=secret", "XCONVEYOR_A=1"})
	if want := []string{"PATH=/usr/bin", "HOME=/root", "XCONVEYOR_A=1"}; !slices.Equal(got, want) {
		t.Fatalf("serverEnv = %q, want %q", got, want)
	}
}
