package bolt

import "container/heap"

// expiryIndex is the time-ordered index of live tasks' expiries and
// deadlines: a timedHeap whose stale entries are bounded. An entry goes
// stale when its task leaves memory before that time (most tasks with an
// expiry or a deadline finish long before it), and lazy deletion drops a
// stale entry only once it reaches the top: behind a task still waiting
// with the earliest time, a busy queue's finished tasks would each leave 24
// bytes until their own time came (a day's worth, at a day's expiry).
//
// So once the index holds more than twice as many entries as there can be
// current ones (every current entry has its key in Engine.expires) plus
// expirySlack, it is compacted: the entries are moved, earliest first,
// from the old heap to a new one, the stale ones dropped, expiryStep at a
// time whenever an entry is added or a task with one leaves memory. No
// step takes longer than a few pops and pushes, however large the index;
// while one runs, the earliest entry is the earlier of the two heaps'
// tops, and entries added meanwhile go to the new heap.
type expiryIndex struct {
	heap timedHeap // every entry, or while compacting, those moved and added since
	old  timedHeap // while compacting: the entries not looked at yet
}

// The stale entries the expiry index may hold beyond its current ones,
// and how many entries a compaction step moves.
const (
	expirySlack = 4096
	expiryStep  = 8
)

// add indexes t and reports whether it became the earliest entry.
func (x *expiryIndex) add(t timed) bool {
	first := x.heap.add(t)
	if o, ok := x.old.peek(); ok && o.at <= t.at {
		return false
	}
	return first
}

// peek returns the earliest entry.
func (x *expiryIndex) peek() (timed, bool) {
	t, ok := x.heap.peek()
	if o, ook := x.old.peek(); ook && (!ok || o.at < t.at) {
		return o, true
	}
	return t, ok
}

// pop removes the earliest entry (peek's).
func (x *expiryIndex) pop() timed {
	t, ok := x.heap.peek()
	if o, ook := x.old.peek(); ook && (!ok || o.at < t.at) {
		return x.old.pop()
	}
	return x.heap.pop()
}

func (x *expiryIndex) len() int { return len(x.heap) + len(x.old) }

// tidy starts or continues a compaction, given how many entries can be
// current (live) and which are (current).
func (x *expiryIndex) tidy(live int, current func(timed) bool) {
	if len(x.old) == 0 {
		x.old = nil
		if len(x.heap) <= 2*live+expirySlack {
			return
		}
		x.old, x.heap = x.heap, make(timedHeap, 0, live)
	}
	for range expiryStep {
		if len(x.old) == 0 {
			x.old = nil
			return
		}
		if t := x.old.pop(); current(t) {
			heap.Push(&x.heap, t)
		}
	}
}

// tidyExpiriesLocked runs a step of the expiry index's compaction, if one
// is due.
func (e *Engine) tidyExpiriesLocked() { e.expHeap.tidy(len(e.expires), e.expiryCurrentLocked) }

// expiryCurrentLocked reports whether t is the current entry of a live
// task's expiry or deadline.
func (e *Engine) expiryCurrentLocked(t timed) bool {
	if _, live := e.tasks.get(t.k); !live {
		return false
	}
	return e.expires[t.k] == t.at
}
