package postgres

import "math"

// A scan floor (scanfloor.go) is only as good as the promise that no
// ready task lies below it. A task does when the transaction that made it
// ready drew its ready_seq before a lease raised the floor past it, and
// committed after that lease's snapshot was taken: the lease could not
// see it. At a few hundred enqueues a second from several producers this
// is not rare (a SOAK run at 800 tasks/s left about one lease in ten
// short of a task below its floor), and each such lease then walked the
// line again from its start: past every dead index entry, which is what
// the floors are there to skip.
//
// So this node keeps the promise itself, for its own transactions:
//   - seqSeen is the highest ready_seq a lease of this node was given.
//     Every transaction notes it when it begins (txn.seqBase): whatever
//     ready_seq it draws later is higher, since the sequence only grows
//     (it is not cached per connection) and seqSeen was drawn before it
//     was seen.
//   - A transaction that made tasks of a queue ready caps, once it
//     commits, every floor of the queue at seqBase+1: its tasks lie at or
//     above the cap. A lease in flight meanwhile (its walk may not have
//     seen them) holds a floorWatch, and raises the floors no higher than
//     the lowest cap a commit put on it.
//
// The floors are capped twice: just before the COMMIT is sent as well,
// so that a lease whose snapshot sees the new tasks does not load floors
// above them in the moment between the commit and its hints' update
// (which would cost it a walk from the start); the cap after the commit
// is the one the watches rely on, since a lease that began between the
// two may not have seen them.
//
// A commit caps the floors at where the leases had got to when it began,
// so a short transaction sets them back by the few tasks leased while it
// ran. Another node's commits are not known here: a task such a commit
// leaves below this node's floors is found by the walk from the start
// that a short walk from the floors still makes (scanfloor.go), as are
// the rows a walk passed over for a lock that stay ready.

// floorWatch is a lease's watch on the floors of a queue it walks: cap
// is how high its walk may raise them (math.MaxInt64: no commit capped
// them since it loaded them).
type floorWatch struct{ cap int64 }

// noteSeqSeen records the highest ready_seq a lease statement returned.
func (e *Engine) noteSeqSeen(seq int64) {
	for {
		cur := e.seqSeen.Load()
		if seq <= cur || e.seqSeen.CompareAndSwap(cur, seq) {
			return
		}
	}
}

// watchFloorsLocked registers t's watch on q's floors, before t loads
// them (under e.mu, with the load).
func (t *txn) watchFloorsLocked(q *queueHint) {
	if _, ok := t.watches[q.name]; ok {
		return
	}
	w := &floorWatch{cap: math.MaxInt64}
	if t.watches == nil {
		t.watches = map[string]*floorWatch{}
	}
	t.watches[q.name] = w
	if q.watches == nil {
		q.watches = map[*floorWatch]struct{}{}
	}
	q.watches[w] = struct{}{}
}

// raiseCapLocked is how high t may raise q's floors: to seq+1 (past a
// task it took), no higher than the caps put on its watch.
func (t *txn) raiseCapLocked(q *queueHint, seq int64) int64 {
	if w := t.watches[q.name]; w != nil {
		return min(seq+1, w.cap)
	}
	return seq + 1
}

// capFloorsLocked caps every floor of q, and the raises of the leases in
// flight, at seq: a committed transaction made tasks ready at or above it.
func capFloorsLocked(q *queueHint, seq int64) {
	q.floors.capAt(seq)
	q.plainFloors.capAt(seq)
	for _, f := range q.kindFloors {
		f.capAt(seq)
	}
	for w := range q.watches {
		w.cap = min(w.cap, seq)
	}
}

func (f *scanFloors) capAt(seq int64) {
	for p := range f {
		f[p] = min(f[p], seq)
	}
}

// capFloorsAhead caps the floors of the queues t made tasks ready in,
// before its COMMIT is sent.
func (e *Engine) capFloorsAhead(t *txn) {
	locked := false
	for name, d := range t.queues {
		if !d.readied {
			continue
		}
		if !locked {
			e.mu.Lock()
			defer e.mu.Unlock()
			locked = true
		}
		if q := e.hints.queues[name]; q != nil {
			capFloorsLocked(q, t.seqBase+1)
		}
	}
}

// dropWatchesLocked ends t's watches, once it committed (after its raises)
// or rolled back.
func (e *Engine) dropWatchesLocked(t *txn) {
	for name, w := range t.watches {
		if q := e.hints.queues[name]; q != nil {
			delete(q.watches, w)
		}
	}
	t.watches = nil
}
