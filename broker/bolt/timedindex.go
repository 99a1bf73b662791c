package bolt

import "container/heap"

// timedIndex is a time-ordered index of live tasks (their expiries and
// deadlines, their due times): a timedHeap whose stale entries are
// bounded. An entry goes stale when its task leaves before that time (most
// tasks with an expiry or a deadline finish long before it; a scheduled
// task may be canceled or run early), and lazy deletion drops a stale
// entry only once it reaches the top: behind a task still waiting with
// the earliest time, a busy queue's finished tasks would each leave 24
// bytes until their own time came (a day's worth, at a day's expiry).
//
// So, by the rule the FIFOs follow (compact.go), once its stale entries
// outnumber the ones that can be current by more than compactSlack, it is
// compacted: the entries are moved, earliest first, from the old heap to a
// new one, the stale ones dropped, compactWork at a time whenever an entry
// is added (and, for expiries, when a task with one leaves memory). No step takes longer than a few pops and
// pushes, however large the index; while one runs, the earliest entry is
// the earlier of the two heaps' tops, and entries added meanwhile go to
// the new heap.
type timedIndex struct {
	heap timedHeap // every entry, or while compacting, those moved and added since
	old  timedHeap // while compacting: the entries not looked at yet
}

// add indexes t and reports whether it became the earliest entry.
func (x *timedIndex) add(t timed) bool {
	first := x.heap.add(t)
	if o, ok := x.old.peek(); ok && o.at <= t.at {
		return false
	}
	return first
}

// peek returns the earliest entry.
func (x *timedIndex) peek() (timed, bool) {
	t, ok := x.heap.peek()
	if o, ook := x.old.peek(); ook && (!ok || o.at < t.at) {
		return o, true
	}
	return t, ok
}

// pop removes the earliest entry (peek's).
func (x *timedIndex) pop() timed {
	t, ok := x.heap.peek()
	if o, ook := x.old.peek(); ook && (!ok || o.at < t.at) {
		return x.old.pop()
	}
	return x.heap.pop()
}

func (x *timedIndex) len() int { return len(x.heap) + len(x.old) }

// tidy starts or continues a compaction, given how many entries can be
// current (live) and which are (current).
func (x *timedIndex) tidy(live int, current func(timed) bool) {
	if len(x.old) == 0 {
		x.old = nil
		if !overSlack(len(x.heap), live, compactSlack) {
			return
		}
		x.old, x.heap = x.heap, make(timedHeap, 0, live)
	}
	for range compactWork {
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

// addDueLocked indexes a SCHEDULED or RETRY task's due time (after a
// compaction step, which must not meet the entry before the task is in the
// table) and signals TimersChanged when it became the earliest.
func (e *Engine) addDueLocked(k key, at int64) {
	e.tidyDueLocked()
	if e.dueHeap.add(timed{at: at, k: k}) {
		e.note.TimersChanged()
	}
}

// tidyDueLocked runs a step of the due index's compaction, or starts one.
// How many entries can be current (the SCHEDULED and RETRY tasks) is
// counted over the queues, so it is counted only when the index has
// doubled since it was last counted (or since a compaction ended).
func (e *Engine) tidyDueLocked() {
	x := &e.dueHeap
	if len(x.old) == 0 && x.len() <= e.dueCheckAt {
		return
	}
	live := 0
	if len(x.old) == 0 {
		for _, q := range e.byName {
			live += int(q.counts[stateScheduled] + q.counts[stateRetry])
		}
	}
	x.tidy(live, e.dueCurrentLocked)
	if len(x.old) == 0 {
		e.dueCheckAt = max(2*x.len(), compactSlack)
	}
}

// dueCurrentLocked reports whether t is the current due time of a live
// SCHEDULED or RETRY task.
func (e *Engine) dueCurrentLocked(t timed) bool {
	m, live := e.tasks.get(t.k)
	return live && (m.state == stateScheduled || m.state == stateRetry) && m.due == t.at
}
