//go:build !unix

package bolt

// allocOffHeap falls back to the Go heap where mmap is not available.
func allocOffHeap[T any](n int) ([]T, func()) {
	return make([]T, n), func() {}
}
