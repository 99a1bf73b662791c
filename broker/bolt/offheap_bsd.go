//go:build unix && !linux

package bolt

import "syscall"

const mapFlags = syscall.MAP_ANON | syscall.MAP_PRIVATE
