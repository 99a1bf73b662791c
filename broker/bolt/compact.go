package bolt

// This file bounds the stale entries of the FIFOs that delete lazily: a
// queue's ready FIFOs and a concurrency key's held FIFOs (heldline.go). A
// task that leaves one without being popped (it is canceled, deleted or
// archived, or expires, while it waits) leaves its entry behind, to be
// skipped when a pop reaches it: finding the entry to remove it would take a scan. A
// FIFO that is popped sheds its stale entries as it goes, and the FIFOs of
// an owner with no valid entry left are dropped whole (dropStaleReady,
// dropStaleHeld). But a FIFO that always holds a valid entry and is never
// popped (nobody serves the queue, it is paused, at its ACTIVE cap or out
// of tokens; a key's admitted task runs for hours) would otherwise grow by
// 16 bytes for every task that leaves it, without bound.
//
// So the tasks that leave pay for the cleaning. Once an owner's stale
// entries outnumber its valid ones by more than Config.compactSlack, a
// compaction pass starts: it scans the owner's FIFOs from their heads and
// keeps only the valid entries, compactWork of them for each departure (a
// stale entry created) while it lasts. A pass starts on 2v+s entries (v
// valid, s the slack) and has scanned them after (2v+s)/compactWork
// departures, which let in no more stale entries than that meanwhile: so
// an owner's FIFOs hold about 2v+s entries at most, whatever their
// history, and each departure pays a few table lookups, amortized O(1). A
// pass left half done when departures stop is harmless: order holds
// throughout, and nothing grows.
//
// The work is done inline by the departures, in steps of compactWork
// entries, rather than by a goroutine such as the table's grower
// (grow.go): a departure already costs about that much (a state write,
// several index updates), so a call pays for the departures it makes and
// never waits for a step of thousands of entries, let alone for a whole
// FIFO; and the bound holds by construction, where a goroutine would have
// to win the engine's lock often enough against, say, a bulk cancel of a
// million tasks under one hold of it. An owner dispatched as fast as it is
// fed never starts a pass, and its pops pay one nil check.
const (
	// compactSlack is how many stale entries beyond its valid ones an
	// owner's FIFOs may hold before a pass starts (64 KiB of keys).
	compactSlack = 4096
	// compactWork is how many entries a pass scans for each stale entry
	// created while it lasts.
	compactWork = 8
)

// fifoPass is a compaction pass under way over one FIFO f. It pops the
// entries of f from its head and moves those it keeps, in order, to kept,
// which goes before what f still holds (the rest of the entries it started
// on, then those pushed since): so the FIFO's order is kept's, then f's,
// and pops take kept's first. When f is empty, kept takes its place.
//
// The pass gives the task of each entry it keeps meta.passMark = mark,
// and a task pushed into f while it lasts takes the other mark (it is yet
// to be scanned). So a second entry of a task met after the first was kept
// (a task that left and came back before its entry was reached, under
// RunTask or a producer's id used again) is dropped as a duplicate: the
// first one popped would have won it anyway. A task that leaves and comes
// back after its entry was kept gets the other mark again, and may keep
// two entries until the next pass; each such return is a departure, which
// pays for the pass.
type fifoPass struct {
	kept fifo
	mark bool
}

// head returns the FIFO that holds the next entry to pop: kept while it
// holds any, else f.
func (p *fifoPass) head(f *fifo) *fifo {
	if p.kept.len() > 0 {
		return &p.kept
	}
	return f
}

// scan moves up to n entries from f's head to kept, those keep keeps, and
// drops the others. It returns how many it scanned: fewer than n when f is
// scanned to its end.
func (p *fifoPass) scan(f *fifo, n int, keep func(key) bool) int {
	for i := range n {
		k, ok := f.pop()
		if !ok {
			return i
		}
		if keep(k) {
			p.kept.push(k)
		}
	}
	return n
}

// finish ends the pass over f, which it scanned to its end: kept takes
// f's place.
func (p *fifoPass) finish(f *fifo) {
	f.free()
	*f, p.kept = p.kept, fifo{}
}

// overSlack reports whether a FIFO owner's entries, of which valid are
// valid, hold more stale ones than its valid ones plus slack.
func overSlack(entries, valid, slack int) bool { return entries-valid > valid+slack }

// prioPass is a compaction pass under way over the FIFOs of a line in
// priority order (a queue's ready FIFOs, a key's held ones), one priority
// at a time, in pop order (9 first).
type prioPass struct {
	fifoPass
	prio int // the FIFO it scans; the lower ones are next
}

// readyMark is the passMark of a task made ready at priority p: that of
// the last pass over its FIFO, as if that pass had kept it, or the other
// one while a pass scans the FIFO.
func (q *queue) readyMark(p int) bool {
	last := q.readyMarks>>p&1 != 0
	return last != (q.readyPass != nil && q.readyPass.prio == p)
}

// readyHead returns the FIFO that holds the next entry of q's priority p
// (empty when there is none).
func (q *queue) readyHead(p int) *fifo {
	if q.readyPass != nil && q.readyPass.prio == p {
		return q.readyPass.head(&q.ready[p])
	}
	return &q.ready[p]
}

// readyEntries counts the entries of q's ready FIFOs, stale ones included.
func (q *queue) readyEntries() int {
	n := 0
	for p := range q.ready {
		n += q.ready[p].len()
	}
	if q.readyPass != nil {
		n += q.readyPass.kept.len()
	}
	return n
}

// dropStaleReady empties q's ready FIFOs once nothing of q is ready: every
// entry left is stale, and no pop would ever reach it (a queue with
// nothing ready is never popped).
func (q *queue) dropStaleReady() {
	if q.readyN != 0 {
		return
	}
	for p := range q.ready {
		q.ready[p].clear()
	}
	q.freeReadyPass()
}

func (q *queue) freeReadyPass() {
	if q.readyPass != nil {
		q.readyPass.kept.free()
		q.readyPass = nil
	}
}

// readyLeftLocked is told that a ready task of q left the ready line
// without being popped, leaving its entry stale (readyN counts it out
// already). The task's meta in the table may still say it is ready: a
// pass may keep its entry, to be skipped by a pop or dropped by the next
// pass.
func (e *Engine) readyLeftLocked(q *queue) {
	if q.readyN == 0 {
		q.dropStaleReady()
		return
	}
	if q.readyPass == nil {
		if !overSlack(q.readyEntries(), q.readyN-q.passedN, e.cfg.compactSlack) {
			return
		}
		q.readyPass = &prioPass{prio: len(q.ready)}
		q.nextReadyFIFO()
	}
	e.compactReadyLocked(q, compactWork)
}

// compactReadyLocked advances q's pass by n entries, or to its end.
func (e *Engine) compactReadyLocked(q *queue, n int) {
	pass := q.readyPass
	for q.readyPass != nil && n > 0 {
		p := pass.prio
		f := &q.ready[p]
		n -= pass.scan(f, n, func(k key) bool { return e.keepReadyLocked(q, p, k, pass.mark) })
		if f.len() == 0 {
			pass.finish(f)
			q.nextReadyFIFO()
		}
	}
}

// nextReadyFIFO moves q's pass on to the next FIFO that holds entries,
// with the mark its last pass did not give, or ends the pass after the
// last FIFO.
func (q *queue) nextReadyFIFO() {
	pass := q.readyPass
	for pass.prio--; pass.prio >= 0; pass.prio-- {
		if q.ready[pass.prio].len() > 0 {
			q.readyMarks ^= 1 << pass.prio
			pass.mark = q.readyMarks>>pass.prio&1 != 0
			return
		}
	}
	q.readyPass = nil
}

// keepReadyLocked decides on an entry of q's FIFO of priority p that a
// pass giving mark scans: it keeps a valid one whose task it has not kept
// yet, and marks the task.
func (e *Engine) keepReadyLocked(q *queue, p int, k key, mark bool) bool {
	m, live := e.tasks.get(k)
	if !live || !m.readyIn(q, p) || m.passMark == mark {
		return false
	}
	m.passMark = mark
	e.tasks.put(k, m)
	return true
}

// readyIn reports whether an entry of q's FIFO of priority p is valid for
// the live task whose meta is m: the task is ready, in that queue and at
// that priority. Any other entry is stale: its task left the ready line,
// or left memory (and may have come back, with RunTask or a producer's id
// used again, elsewhere).
func (m *meta) readyIn(q *queue, p int) bool {
	return m.state == statePending && m.flags&(flagInReady|flagPassed) == flagInReady && m.queue == q.index && int(m.prio) == p
}
