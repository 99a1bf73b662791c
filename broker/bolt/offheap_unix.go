//go:build unix

package bolt

import (
	"fmt"
	"syscall"
	"unsafe"
)

// allocOffHeap returns a zeroed array of n values of T in memory mapped
// outside the Go heap, and the function that unmaps it. T must hold no
// pointers: the garbage collector never looks at this memory.
//
// The engine's big per-task indexes live here so that the collector's heap
// goal (twice the live heap, by default) is computed from the small,
// short-lived rest of the heap rather than from a million tasks' worth of
// index: without this a million pending tasks cost about twice their
// index size in resident memory.
func allocOffHeap[T any](n int) ([]T, func()) {
	size := n * int(unsafe.Sizeof(*new(T)))
	if size == 0 {
		return nil, func() {}
	}
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, mapFlags)
	if err != nil {
		panic(fmt.Sprintf("bolt: map %d bytes for an index: %v", size, err))
	}
	prepareMapping(mem)
	return unsafe.Slice((*T)(unsafe.Pointer(&mem[0])), n), func() { _ = syscall.Munmap(mem) }
}
