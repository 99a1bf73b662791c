//go:build linux

package bolt

import "syscall"

const mapFlags = syscall.MAP_ANON | syscall.MAP_PRIVATE

// Linux madvise advice values the syscall package does not name.
const (
	madvHugepage      = 14 // MADV_HUGEPAGE
	madvPopulateWrite = 23 // MADV_POPULATE_WRITE, Linux 5.14
)

// prepareMapping asks for transparent huge pages and pre-faults the
// pages. The index table is probed at random: with 4 KiB pages a table of
// ten million tasks (hundreds of MiB) misses the TLB on nearly every
// probe, with 2 MiB pages it mostly hits. Pre-faulting takes one bulk
// fault instead of one per page touched, which in a VM costs
// microseconds each.
func prepareMapping(mem []byte) {
	if len(mem) >= 2<<20 {
		_ = syscall.Madvise(mem, madvHugepage) // advice: fine to be refused
	}
	if syscall.Madvise(mem, madvPopulateWrite) == nil {
		return
	}
	for i := 0; i < len(mem); i += syscall.Getpagesize() { // older kernels
		mem[i] = 0
	}
}
