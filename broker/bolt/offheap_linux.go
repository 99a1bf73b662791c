//go:build linux

package bolt

import "syscall"

// mapFlags pre-faults the pages: one bulk fault instead of one per page
// touched, which in a VM costs microseconds each.
const mapFlags = syscall.MAP_ANON | syscall.MAP_PRIVATE | syscall.MAP_POPULATE
