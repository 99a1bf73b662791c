package bolt

import "container/heap"

// lease is the current lease of an ACTIVE task.
type lease struct {
	k       key
	session string
	token   uint64
	expiry  int64
	// limit caps every renewal: the task's deadline or timeout plus a
	// grace (0: no cap). A worker that runs past it loses the lease.
	limit int64
	// started: the attempt's start was authorized (AuthorizeStart).
	started bool
	idx     int // position in the leaseHeap
}

// leaseHeap orders the current leases by expiry. Unlike the other timed
// indexes it is indexed: a renewal moves its lease in place and an ended
// lease leaves at once, so heartbeats never add entries (a heartbeat that
// names one lease a million times costs nothing extra) and the heap holds
// exactly the live leases.
type leaseHeap []*lease

func (h leaseHeap) Len() int           { return len(h) }
func (h leaseHeap) Less(i, j int) bool { return h[i].expiry < h[j].expiry }
func (h leaseHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *leaseHeap) Push(x any) {
	l := x.(*lease)
	l.idx = len(*h)
	*h = append(*h, l)
}
func (h *leaseHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	l.idx = -1
	return l
}

// add inserts l and reports whether it became the earliest.
func (h *leaseHeap) add(l *lease) bool {
	heap.Push(h, l)
	return (*h)[0] == l
}

// moved restores the order after l's expiry changed and reports whether
// l is now the earliest.
func (h *leaseHeap) moved(l *lease) bool {
	heap.Fix(h, l.idx)
	return (*h)[0] == l
}

// remove takes l out.
func (h *leaseHeap) remove(l *lease) {
	if l.idx >= 0 && l.idx < len(*h) && (*h)[l.idx] == l {
		heap.Remove(h, l.idx)
	}
	h.shrink()
}

// peek returns the lease that expires first.
func (h leaseHeap) peek() *lease {
	if len(h) == 0 {
		return nil
	}
	return h[0]
}

// shrink gives memory back once the heap is much smaller than its array.
func (h *leaseHeap) shrink() {
	if c := cap(*h); c > 1024 && len(*h) < c/4 {
		*h = append(make(leaseHeap, 0, 2*len(*h)), *h...)
	}
}
