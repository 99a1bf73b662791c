package bolt

import "slices"

// This file is a concurrency key's line of held tasks: its pending tasks
// beyond its limit, admitted as its admitted ones leave in the order a
// queue's ready line dispatches, highest priority first and first in,
// first out within a priority. A queue keeps ten FIFOs, one per priority;
// a key keeps a FIFO only for each priority it holds entries of, in a
// short slice, highest first: most keys hold tasks of one priority, or
// none, and a server may know millions of keys. A key that holds nothing
// keeps one empty FIFO, ready for its next held task of any priority.
//
// Entries delete lazily and a compaction pass bounds the stale ones, as
// the ready FIFOs' (compact.go): the pass scans the key's FIFOs one
// priority at a time, in pop order.

// heldFIFO is the FIFO of a key's held tasks of one priority.
type heldFIFO struct {
	fifo
	prio uint8
	// mark is the mark the last compaction pass over this FIFO gave.
	mark bool
}

// hold puts pending task k, whose meta m the caller writes to the
// table, at the back of c's line at its priority.
func (c *ckey) hold(k key, m *meta) {
	f := c.heldFIFOFor(int(m.prio))
	m.flags |= flagHeld
	m.passMark = c.heldMarkFor(f)
	f.push(k)
	c.heldN++
}

// heldFIFOFor returns c's FIFO of priority p, adding it (or relabelling
// the empty one a key that holds nothing keeps) if there is none.
func (c *ckey) heldFIFOFor(p int) *heldFIFO {
	i := 0
	for ; i < len(c.held) && int(c.held[i].prio) >= p; i++ {
		if int(c.held[i].prio) == p {
			return &c.held[i]
		}
	}
	if len(c.held) == 1 && c.heldN == 0 && c.heldPass == nil && c.held[0].len() == 0 {
		c.held[0].prio = uint8(p)
		return &c.held[0]
	}
	c.held = slices.Insert(c.held, i, heldFIFO{prio: uint8(p)})
	return &c.held[i]
}

// heldAt returns c's FIFO of priority p, or nil.
func (c *ckey) heldAt(p int) *heldFIFO {
	for i := range c.held {
		if int(c.held[i].prio) == p {
			return &c.held[i]
		}
	}
	return nil
}

// popHeld takes the entry at the head of c's line, from the highest
// priority that holds any, and reports its priority; false when the line
// is empty. A FIFO found empty is dropped on the way, unless it is the
// key's last.
func (c *ckey) popHeld() (key, int, bool) {
	for len(c.held) > 0 {
		f := &c.held[0]
		if h := c.heldHead(f); h.len() > 0 {
			k, _ := h.pop()
			return k, int(f.prio), true
		}
		if len(c.held) == 1 {
			break
		}
		c.dropHeldFIFO(0)
	}
	return key{}, 0, false
}

// heldHead returns the FIFO that holds the next entry of c's FIFO f: the
// kept entries of a pass under way over f first.
func (c *ckey) heldHead(f *heldFIFO) *fifo {
	if c.heldPass != nil && c.heldPass.prio == int(f.prio) {
		return c.heldPass.head(&f.fifo)
	}
	return &f.fifo
}

// dropHeldFIFO drops c's empty FIFO at index i; a pass over it moves on.
func (c *ckey) dropHeldFIFO(i int) {
	p := int(c.held[i].prio)
	c.held[i].free()
	c.held = slices.Delete(c.held, i, i+1)
	if c.heldPass != nil && c.heldPass.prio == p {
		c.heldPass.kept.free()
		c.nextHeldFIFO()
	}
}

// heldMarkFor is the passMark of a task held in c's FIFO f, as readyMark.
func (c *ckey) heldMarkFor(f *heldFIFO) bool {
	return f.mark != (c.heldPass != nil && c.heldPass.prio == int(f.prio))
}

// heldEntries counts the entries of c's held FIFOs, stale ones included.
func (c *ckey) heldEntries() int {
	n := 0
	for i := range c.held {
		n += c.held[i].len()
	}
	if c.heldPass != nil {
		n += c.heldPass.kept.len()
	}
	return n
}

// dropStaleHeld empties c's line once c holds no task back: every entry
// left is stale. It keeps one FIFO, emptied, for the next held task.
func (c *ckey) dropStaleHeld() {
	if c.heldN != 0 || len(c.held) == 0 {
		return
	}
	c.freeHeldPass()
	c.held[0].clear()
	if len(c.held) > 1 {
		for i := range c.held[1:] {
			c.held[1+i].free()
		}
		c.held = []heldFIFO{c.held[0]} // not a slice of the longer array
	}
}

// freeHeld releases c's line and any pass over it.
func (c *ckey) freeHeld() {
	for i := range c.held {
		c.held[i].free()
	}
	c.held = nil
	c.freeHeldPass()
}

func (c *ckey) freeHeldPass() {
	if c.heldPass != nil {
		c.heldPass.kept.free()
		c.heldPass = nil
	}
}

// heldLeftLocked is told that a task c held back left without being
// admitted, leaving its entry stale (heldN counts it out already); as
// readyLeftLocked.
func (e *Engine) heldLeftLocked(c *ckey) {
	if c.heldN == 0 {
		c.dropStaleHeld()
		return
	}
	if c.heldPass == nil {
		if !overSlack(c.heldEntries(), c.heldN, e.cfg.compactSlack) {
			return
		}
		c.heldPass = &prioPass{prio: len(c.q.ready)}
		c.nextHeldFIFO()
	}
	e.compactHeldLocked(c, compactWork)
}

// compactHeldLocked advances c's pass by n entries, or to its end. A FIFO
// the pass leaves empty (all its entries were stale) is dropped.
func (e *Engine) compactHeldLocked(c *ckey, n int) {
	pass := c.heldPass
	for c.heldPass != nil && n > 0 {
		p := pass.prio
		f := c.heldAt(p)
		n -= pass.scan(&f.fifo, n, func(k key) bool { return e.keepHeldLocked(c, p, k, pass.mark) })
		if f.len() == 0 {
			pass.finish(&f.fifo)
			c.nextHeldFIFO()
			if f = c.heldAt(p); f.len() == 0 && len(c.held) > 1 {
				f.free()
				c.held = slices.DeleteFunc(c.held, func(h heldFIFO) bool { return int(h.prio) == p })
			}
		}
	}
}

// nextHeldFIFO moves c's pass on to its next FIFO below the pass's
// priority that holds entries, with the mark its last pass did not give,
// or ends the pass after the last FIFO.
func (c *ckey) nextHeldFIFO() {
	pass := c.heldPass
	for i := range c.held {
		if f := &c.held[i]; int(f.prio) < pass.prio && f.len() > 0 {
			f.mark = !f.mark
			pass.prio, pass.mark = int(f.prio), f.mark
			return
		}
	}
	c.heldPass = nil
}

// keepHeldLocked decides on an entry of c's held FIFO of priority p, as
// keepReadyLocked.
func (e *Engine) keepHeldLocked(c *ckey, p int, k key, mark bool) bool {
	m, live := e.tasks.get(k)
	if !live || !e.heldBy(k, m, c, p) || m.passMark == mark {
		return false
	}
	m.passMark = mark
	e.tasks.put(k, m)
	return true
}

// held reports whether the live task whose meta is m is held back (by
// its own key).
func (m *meta) held() bool { return m.state == statePending && m.flags&flagHeld != 0 }

// heldBy reports whether an entry of c's held FIFO of priority p is
// valid for the live task k whose meta is m: the task is held back, by c,
// at that priority. The key and the priority matter: a task that left
// memory while c held it left its entry in c's FIFO, and its id may be
// used again by a producer for a task of another key, or of another
// priority (the key and the priority are fixed by each record, not by
// the id).
func (e *Engine) heldBy(k key, m meta, c *ckey, p int) bool {
	return m.held() && e.keyOf[k] == c && int(m.prio) == p
}
