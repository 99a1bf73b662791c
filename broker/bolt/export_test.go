package bolt

// LeaseHeapSize reports how many entries the lease heap holds and the
// capacity of its array, for tests of its memory.
func LeaseHeapSize(e *Engine) (n, capacity int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.leaseHeap), cap(e.leaseHeap)
}
