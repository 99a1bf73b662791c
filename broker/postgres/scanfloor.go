package postgres

import (
	"context"
	"strconv"
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
//     committed after leaves a task below it. A walk from the floors that
//     comes out short of what the hints count ready walks again from the
//     start, so such a task waits only while the queue has other work
//     (it is taken out of FIFO order, never stranded).
//
// The floors are per node and in memory (they start at 0): another node's
// leases and commits never make them wrong, only (through a short walk)
// cost a walk from the start.
//
// A queue has two sets: its floors, below which every ready task was
// taken, and its plain floors, below which every ready task but the
// at-most-once ones was taken. An open lease's walk raises both; the zero
// route's walk (conveyor_tasks_ready_plain) raises the plain ones; a walk
// that passes tasks over (by type) starts from them and raises neither
// (route.go).

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
}

func (w *readyWalk) took(priority int32, seq int64) {
	w.rows++
	if priority >= 0 && priority < priorityLevels {
		w.maxSeq[priority] = max(w.maxSeq[priority], seq)
	}
}

// loadFloors copies queue's floors, or its plain floors (those of the
// line without the at-most-once tasks, conveyor_tasks_ready_plain).
func (e *Engine) loadFloors(queue string, plain bool) scanFloors {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.hints.queues[queue]
	switch {
	case q == nil:
		return scanFloors{}
	case plain:
		return q.plainFloors
	}
	return q.floors
}

// raiseFloors raises queue's plain floors above what walk took, and when
// all is set (the walk took at-most-once tasks too) its floors, once t
// commits: every task of the line below what it took was taken.
func (t *txn) raiseFloors(queue string, walk readyWalk, all bool) {
	t.after = append(t.after, func() {
		t.e.mu.Lock()
		defer t.e.mu.Unlock()
		q := t.e.hints.queues[queue]
		if q == nil {
			return
		}
		for p, seq := range walk.maxSeq {
			if seq == 0 {
				continue
			}
			q.plainFloors[p] = max(q.plainFloors[p], seq+1)
			if all {
				q.floors[p] = max(q.floors[p], seq+1)
			}
		}
	})
}

// leaseReady leases up to n ready tasks of queue that w takes. A line
// walk goes from its scan floors, and from the start of the line when the
// walk from the floors came out short (a task may lie below them); a
// typed walk reads each type's part of the line from its start.
func (t *txn) leaseReady(ctx context.Context, queue string, n int, w routeWalk, l leaseArgs) ([]leased, error) {
	if w.kind == walkTyped {
		sql, args := w.pick(nil)
		got, _, err := t.leaseQueue(ctx, queue, n, sql, args, l)
		return got, err
	}
	floors := t.e.loadFloors(queue, w.plainFloors())
	sql, args := w.pick(&floors)
	got, walk, err := t.leaseQueue(ctx, queue, n, sql, args, l)
	if err != nil {
		return nil, err
	}
	if walk.rows < n && floors.any() {
		sql, args := w.pick(nil)
		below, again, err := t.leaseQueue(ctx, queue, n-walk.rows, sql, args, l)
		if err != nil {
			return nil, err
		}
		got = append(below, got...)
		walk.rows += again.rows
		for p, seq := range again.maxSeq {
			walk.maxSeq[p] = max(walk.maxSeq[p], seq)
		}
	}
	if walk.rows > 0 && w.raises() {
		t.raiseFloors(queue, walk, w.kind == walkOpen)
	}
	return got, nil
}
