package postgres

import (
	"context"
	"slices"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is the queues' bound on waiting tasks (QueueConfig.MaxWaiting).
// The check is made in memory, under the engine's lock, against the
// queue's waiting count and the new tasks other calls in progress were
// admitted (entering), which the count takes over when they commit: two
// enqueues cannot both take the last room. While no queue is bounded an
// enqueue pays one branch.
//
// A queue that refused a task is marked (refused); while the mark is set,
// every commit that leaves the queue room tells Notifier.QueueRoom, whose
// answer (nobody waits any more) clears it.

// admitNew refuses the stored items that would take their queue past its
// bound, in order, each counted against the ones before it; in a
// transaction of all or nothing (tx), the first refusal fails the call.
// A refused item's row (and unique key) is taken back.
func (t *txn) admitNew(ctx context.Context, items []newItem, tx bool) error {
	refused, err := t.e.enter(t, items, tx)
	if err != nil || len(refused) == 0 {
		return err
	}
	for _, i := range refused {
		it := &items[i]
		if _, err := t.exec(ctx, `DELETE FROM conveyor_tasks WHERE id = $1`, it.id); err != nil {
			return err
		}
		if it.nt.UniqueKey != "" {
			if _, err := t.exec(ctx, `DELETE FROM conveyor_unique WHERE key = $1 AND task_id = $2`, it.nt.UniqueKey, it.id); err != nil {
				return err
			}
		}
		it.stored = false
	}
	return nil
}

// enter admits the stored items under their queues' bounds (see
// admitNew), counting them in the queues' entering until t ends, and
// returns the indexes of those refused.
func (e *Engine) enter(t *txn, items []newItem, tx bool) ([]int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.hints.bounded == 0 {
		return nil, nil
	}
	if tx {
		need := map[string]int{}
		for i := range items {
			if it := &items[i]; it.stored && !it.state.Terminal() {
				need[it.nt.Queue]++
			}
		}
		names := make([]string, 0, len(need))
		for i := range items {
			if q := items[i].nt.Queue; need[q] > 0 && !slices.Contains(names, q) {
				names = append(names, q)
			}
		}
		for _, name := range names {
			if err := e.roomLocked(name, need[name]); err != nil {
				return nil, err
			}
		}
		for _, name := range names {
			e.enterLocked(t, name, need[name])
		}
		return nil, nil
	}
	var refused []int
	for i := range items {
		it := &items[i]
		if !it.stored || it.state.Terminal() {
			continue
		}
		if err := e.roomLocked(it.nt.Queue, 1); err != nil {
			it.err = err
			refused = append(refused, i)
			continue
		}
		e.enterLocked(t, it.nt.Queue, 1)
	}
	return refused, nil
}

// roomLocked refuses n new tasks of the named queue if they would take it
// past its bound, and marks the queue so that its next room is signalled.
func (e *Engine) roomLocked(name string, n int) error {
	q := e.hints.queues[name]
	if q == nil || q.cfg.Admits(q.counts.Waiting()+q.entering, n) {
		return nil
	}
	q.refused = true
	return &broker.QueueFullError{Queue: name, MaxWaiting: q.cfg.MaxWaiting}
}

// enterLocked counts n new tasks of queue admitted by t.
func (e *Engine) enterLocked(t *txn, name string, n int) {
	q := e.hints.queues[name]
	if q == nil || q.cfg.MaxWaiting <= 0 {
		return
	}
	q.entering += int64(n)
	if t.entering == nil {
		t.entering = map[string]int64{}
	}
	t.entering[name] += int64(n)
}

// giveBack gives back what a transaction that did not commit reserved:
// the new tasks it admitted under bounds, the tasks it leased under caps.
func (e *Engine) giveBack(t *txn) {
	if len(t.entering) == 0 && len(t.leasing) == 0 && len(t.owned) == 0 && len(t.watches) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.dropWatchesLocked(t)
	for name, n := range t.entering {
		if q := e.hints.queues[name]; q != nil {
			q.entering -= n
			e.roomChangedLocked(q)
		}
	}
	for name, n := range t.leasing {
		if q := e.hints.queues[name]; q != nil {
			q.leasing -= n
		}
	}
	for name, n := range t.owned {
		if q := e.hints.queues[name]; q != nil {
			q.owned -= n
		}
	}
	t.entering, t.leasing, t.owned = nil, nil, nil
}

// roomChangedLocked tells the notifier of the room q has, if q refused a
// task and the notifier has not answered since that nobody waits.
func (e *Engine) roomChangedLocked(q *queueHint) {
	if !q.refused {
		return
	}
	if room := q.cfg.Room(q.counts.Waiting() + q.entering); room > 0 {
		q.refused = e.note.QueueRoom(q.name, room)
	}
}

// boundChangedLocked follows a change of q's bound from old: it keeps the
// count of bounded queues, and signals the room a raised or removed bound
// makes.
func (e *Engine) boundChangedLocked(q *queueHint, old int64) {
	switch now := q.cfg.MaxWaiting; {
	case old <= 0 && now > 0:
		e.hints.bounded++
	case old > 0 && now <= 0:
		e.hints.bounded--
	}
	e.roomChangedLocked(q)
}
