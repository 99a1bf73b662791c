package bolt

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is forgetting a queue. A queue's slot in Engine.queues is
// its 16-bit index, which live task metadata, group and concurrency-key
// ids carry, so a deleted queue's slot is not removed (that would
// renumber every queue after it) but emptied (nil) and put on
// Engine.freeQueues, which queueLocked takes from before it appends. A
// queue is deleted only when it holds no task at all, so nothing of a
// live task names the slot; what may outlive the tasks (empty open
// groups, fired groups, keys, ready FIFO blocks) is dropped here, so
// that the queue that reuses the slot inherits nothing.

// DeleteQueue forgets an empty queue, durably; see broker.Broker.
func (e *Engine) DeleteQueue(ctx context.Context, name string) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errClosed
	}
	q := e.byName[name]
	if q == nil {
		e.mu.Unlock()
		return fmt.Errorf("queue %q: %w", name, broker.ErrNotFound)
	}
	if err := e.deletableLocked(q); err != nil {
		e.mu.Unlock()
		return err
	}
	if q.cfg.MaxWaiting > 0 {
		e.bounded--
	}
	e.forgetQueueLocked(q)
	b := e.commit.appendSyncLocked(deleteQueueOp(name), nil)
	e.mu.Unlock()
	return e.commit.wait(ctx, b)
}

// deleteQueueOp removes a queue's record and its history. The count deltas that earlier
// ops of the same commit made for the queue (its last tasks deleted, or
// finished) are dropped with it: the transaction writes its deltas at its
// end, which would otherwise bring the record back holding them. Deltas of
// later ops are the fresh queue's of that name.
func deleteQueueOp(name string) op {
	return func(w *txw) error {
		delete(w.deltas, name)
		if err := dropQueueHistory(w, name); err != nil {
			return err
		}
		return w.qrecs.Delete([]byte(name))
	}
}

// deletableLocked refuses the deletion of a queue that holds tasks (in
// any state: the counts include enqueues not durable yet and terminal
// tasks not purged yet) or that a cron entry enqueues into.
func (e *Engine) deletableLocked(q *queue) error {
	var total int64
	var parts []string
	for s, n := range q.counts {
		if n != 0 {
			total += n
			parts = append(parts, fmt.Sprintf("%d %s", n, broker.State(s)))
		}
	}
	if total != 0 {
		return fmt.Errorf("queue %q still holds %d %s (%s); delete them first: %w",
			q.name, total, plural(total, "task", "tasks"), strings.Join(parts, ", "), broker.ErrInvalidState)
	}
	var crons []string
	for id, rec := range e.crons {
		if rec.GetQueue() == q.name {
			crons = append(crons, fmt.Sprintf("%q", id))
		}
	}
	if len(crons) > 0 {
		sort.Strings(crons)
		return fmt.Errorf("queue %q is the queue of cron %s %s, whose next fire would bring it back; delete or change %s first: %w",
			q.name, plural(int64(len(crons)), "entry", "entries"), strings.Join(crons, ", "),
			plural(int64(len(crons)), "it", "them"), broker.ErrInvalidState)
	}
	return nil
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// forgetQueueLocked removes an empty queue from memory and frees its
// slot. Groups of the slot are made stale first (fired, a new gen), so
// that their entries in groupHeap are skipped when popped instead of
// firing into the queue that reuses the slot; a rate-limit timer that
// fires later holds the old *queue, which nothing else reaches and whose
// readyN and fired are empty, so it signals nothing.
func (e *Engine) forgetQueueLocked(q *queue) {
	for id, g := range e.openGroups {
		if id.queue == q.index {
			delete(e.openGroups, id)
			g.fired = true
			g.gen++
		}
	}
	q.fired.all(func(g *group) bool { g.gen++; return true })
	q.fired.reset()
	q.bucket = bucket{}
	for id, c := range e.ckeys {
		if id.queue == q.index {
			delete(e.ckeys, id)
			c.freeHeld()
		}
	}
	for p := range q.ready {
		q.ready[p].free()
	}
	q.freeReadyPass()
	q.freePassed()
	q.readyN = 0
	delete(e.byName, q.name)
	delete(e.rateWaits, q)
	e.queues[q.index] = nil
	e.freeQueues = append(e.freeQueues, q.index)
}

// liveQueuesLocked is how many queues the engine knows (deleted ones
// leave a free slot, which does not count).
func (e *Engine) liveQueuesLocked() int {
	return len(e.queues) - len(e.freeQueues)
}
