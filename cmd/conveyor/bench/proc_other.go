//go:build !linux

package bench

import "os/exec"

// setParentDeathSignal has nothing to set where the kernel has no
// parent-death signal: a bench killed outright leaves its server running.
func setParentDeathSignal(*exec.Cmd) {}
