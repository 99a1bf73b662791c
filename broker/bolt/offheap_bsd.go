//go:build unix && !linux

package bolt

import "syscall"

const mapFlags = syscall.MAP_ANON | syscall.MAP_PRIVATE

// prepareMapping has nothing to ask for here: pages fault in as touched.
func prepareMapping([]byte) {}
