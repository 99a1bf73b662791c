package postgres

import (
	"context"
	"strconv"

	"github.com/conveyor-dev/conveyor/broker"
)

// A queue's scan floors say where its leases start their walk of the
// ready index (conveyor_tasks_ready, by queue, priority, ready_seq): one
// ready_seq per priority. A lease walks one priority at a time, highest
// first, so that with the priority fixed the floor bounds where the index
// scan starts.
//
// Why: the index keeps an entry for every row version that was ready
// until VACUUM removes it. While any transaction holds an old snapshot (a
// long report, a backup, pg_dump), VACUUM can remove nothing newer, so the
// entries of every task leased since stay at the head of the line, dead,
// and a lease from the start would read each one (and visit its row in
// the table) before it reaches a live row: at 800 tasks/s, tens of
// thousands per lease after a minute. The floors skip them.
//
// The rules that keep them safe:
//   - Every path that makes a task ready draws a fresh ready_seq from the
//     sequence, so new work lands above the floors.
//   - A walk takes a priority's ready rows in ready_seq order, so once it
//     took a row, every ready row it could see below it is taken too: the
//     priority's floor rises above the highest ready_seq it took, when the
//     transaction commits.
//   - A transaction that drew its ready_seq before a floor rose and
//     committed after would leave a task below it: this node's own
//     transactions cap the floors below their tasks when they commit
//     (floorwatch.go).
//   - Whatever is left below a floor (a task another node's transaction
//     made ready, a row a walk passed over because another transaction
//     held its lock): a walk from the floors that comes out short of what
//     the hints count ready walks again from the start, so such a task
//     waits only while the queue has other work (it is taken out of FIFO
//     order, never stranded).
//
// The floors are per node and in memory (they start at 0): another node's
// leases and commits never make them wrong, only (through a short walk)
// cost a walk from the start.
//
// A queue has two sets of line floors: its floors, below which every
// ready task was taken, and its plain floors, below which every ready
// task but the at-most-once ones was taken. An open lease's walk raises
// both; the zero route's walk (conveyor_tasks_ready_plain) raises the
// plain ones; a walk that passes tasks over by excepting types starts
// from them and raises neither. A typed walk goes by floors of its kinds
// (type and at-most-once-ness), which it raises (route.go).

// priorityLevels are the priorities a ready line holds: 0 (never stored
// by the server, which stores the default, 4, in its place) to 9.
const priorityLevels = 10

// maxPriorityText is the highest priority, for the lease's SQL.
var maxPriorityText = strconv.Itoa(priorityLevels - 1)

// scanFloors holds a queue's floor for each priority, by priority.
type scanFloors [priorityLevels]int64

// byPriority lists the floors highest priority first, as the lease's walk
// takes them (nil: all 0).
func (f *scanFloors) byPriority() []int64 {
	out := make([]int64, priorityLevels)
	if f != nil {
		for i := range out {
			out[i] = f[priorityLevels-1-i]
		}
	}
	return out
}

// any reports whether any floor is above 0.
func (f *scanFloors) any() bool {
	for _, v := range f {
		if v > 0 {
			return true
		}
	}
	return false
}

// readyWalk is what a lease's walks of a ready line took.
type readyWalk struct {
	rows int // the rows taken (leased, expired, or sent back to their key's line)
	// maxSeq holds the highest ready_seq taken of each priority (0: none).
	maxSeq scanFloors
	// byKind holds maxSeq per kind, for a typed walk (nil otherwise).
	byKind map[broker.Kind]*scanFloors
}

func (w *readyWalk) took(priority int32, seq int64) {
	w.rows++
	w.maxSeq.raise(priority, seq)
}

// tookKind records a row of kind k taken by a typed walk.
func (w *readyWalk) tookKind(k broker.Kind, priority int32, seq int64) {
	w.took(priority, seq)
	if priority >= 0 && priority < priorityLevels {
		w.kindSeq(k, int(priority), seq)
	}
}

// add adds what another walk of the same lease took.
func (w *readyWalk) add(o readyWalk) {
	w.rows += o.rows
	for p, seq := range o.maxSeq {
		w.maxSeq[p] = max(w.maxSeq[p], seq)
	}
	for k, f := range o.byKind {
		for p, seq := range f {
			if seq != 0 {
				w.kindSeq(k, p, seq)
			}
		}
	}
}

// kindSeq records seq taken of kind k at priority p.
func (w *readyWalk) kindSeq(k broker.Kind, p int, seq int64) {
	if w.byKind == nil {
		w.byKind = map[broker.Kind]*scanFloors{}
	}
	f := w.byKind[k]
	if f == nil {
		f = &scanFloors{}
		w.byKind[k] = f
	}
	f[p] = max(f[p], seq)
}

// raise records seq taken at priority.
func (f *scanFloors) raise(priority int32, seq int64) {
	if priority >= 0 && priority < priorityLevels {
		f[priority] = max(f[priority], seq)
	}
}

// loadFloors copies queue's floors, or its plain floors (those of the
// line without the at-most-once tasks, conveyor_tasks_ready_plain), and
// t watches them from now on (floorwatch.go).
func (t *txn) loadFloors(queue string, plain bool) scanFloors {
	e := t.e
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.hints.queues[queue]
	if q != nil {
		t.watchFloorsLocked(q)
	}
	switch {
	case q == nil:
		return scanFloors{}
	case plain:
		return q.plainFloors
	}
	return q.floors
}

// raiseFloors raises queue's plain floors above what walk took, and when
// all is set (the walk took at-most-once tasks too) its floors, when t
// commits: every task of the line below what it took was taken, but those
// of the transactions that committed meanwhile (raiseCapLocked).
func (t *txn) raiseFloors(queue string, walk readyWalk, all bool) {
	t.raises = append(t.raises, floorRaise{queue, func(q *queueHint) {
		for p, seq := range walk.maxSeq {
			if seq == 0 {
				continue
			}
			to := t.raiseCapLocked(q, seq)
			q.plainFloors[p] = max(q.plainFloors[p], to)
			if all {
				q.floors[p] = max(q.floors[p], to)
			}
		}
	}})
}

// leaseReady leases up to n ready tasks of queue that w takes. A line
// walk goes from its scan floors, and from the start of the line when the
// walk from the floors came out short (a task may lie below them); a
// typed walk does the same with its kinds' floors (leaseTyped).
func (t *txn) leaseReady(ctx context.Context, queue string, n int, w routeWalk, l leaseArgs) ([]leased, error) {
	if w.kind == walkTyped {
		return t.leaseTyped(ctx, queue, n, w, l)
	}
	floors := t.loadFloors(queue, w.plainFloors())
	sql, args := w.pick(&floors)
	got, walk, err := t.leaseQueue(ctx, queue, n, sql, args, l)
	if err != nil {
		return nil, err
	}
	if walk.rows < n && floors.any() {
		if got, err = t.walkFromStart(ctx, queue, n, w, l, got, &walk); err != nil {
			return nil, err
		}
	}
	if walk.rows > 0 && w.raises() {
		t.raiseFloors(queue, walk, w.kind == walkOpen)
	}
	return got, nil
}

// leaseTyped leases up to n ready tasks of queue of the typed walk w's
// kinds. With a floor above 0 for any of them, it walks each kind's part
// of the line from its floors first (one index range per priority), and
// from the start (one ordered range per kind) when that came out short;
// with none, from the start alone, which reads an empty line in fewer
// steps. The kinds' floors rise above what each took.
func (t *txn) leaseTyped(ctx context.Context, queue string, n int, w routeWalk, l leaseArgs) ([]leased, error) {
	l.byKind = true
	floors := t.loadKindFloors(queue, w.kinds())
	var got []leased
	var walk readyWalk
	if floors != nil {
		sql, args := w.pickFloored(floors)
		var err error
		if got, walk, err = t.leaseQueue(ctx, queue, n, sql, args, l); err != nil {
			return nil, err
		}
	}
	if walk.rows < n {
		var err error
		if got, err = t.walkFromStart(ctx, queue, n, w, l, got, &walk); err != nil {
			return nil, err
		}
	}
	if walk.rows > 0 {
		t.raiseKindFloors(queue, walk)
	}
	return got, nil
}

// walkFromStart tops up a walk that came out short of n (walk took got)
// with w's walk from the start of the line, whose tasks go first: they
// lie below the ones the walk from the floors took.
func (t *txn) walkFromStart(ctx context.Context, queue string, n int, w routeWalk, l leaseArgs, got []leased, walk *readyWalk) ([]leased, error) {
	sql, args := w.pick(nil)
	below, again, err := t.leaseQueue(ctx, queue, n-walk.rows, sql, args, l.from(walk.rows))
	if err != nil {
		return nil, err
	}
	walk.add(again)
	return append(below, got...), nil
}

// maxKindFloors bounds the kinds a queue keeps floors for: past it they
// are all dropped (a floor of 0 costs a walk from the start, never a
// task), so that workers naming ever new types cannot grow the memory.
const maxKindFloors = 256

// loadKindFloors copies the floors of queue's kinds, in kinds' order, or
// returns nil when none is above 0; t watches them from now on.
func (t *txn) loadKindFloors(queue string, kinds []broker.Kind) []scanFloors {
	e := t.e
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.hints.queues[queue]
	if q != nil {
		t.watchFloorsLocked(q)
	}
	if q == nil || len(q.kindFloors) == 0 {
		return nil
	}
	var out []scanFloors
	for i, k := range kinds {
		f := q.kindFloors[k]
		if f == nil || !f.any() {
			continue
		}
		if out == nil {
			out = make([]scanFloors, len(kinds))
		}
		out[i] = *f
	}
	return out
}

// raiseKindFloors raises the floors of the kinds a typed walk took rows
// of above what it took of each, when t commits (as raiseFloors).
func (t *txn) raiseKindFloors(queue string, walk readyWalk) {
	t.raises = append(t.raises, floorRaise{queue, func(q *queueHint) {
		if q.kindFloors == nil || len(q.kindFloors) >= maxKindFloors {
			q.kindFloors = map[broker.Kind]*scanFloors{}
		}
		for k, took := range walk.byKind {
			f := q.kindFloors[k]
			if f == nil {
				f = &scanFloors{}
				q.kindFloors[k] = f
			}
			for p, seq := range took {
				if seq != 0 {
					f[p] = max(f[p], t.raiseCapLocked(q, seq))
				}
			}
		}
	}})
}
