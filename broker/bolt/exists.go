package bolt

import (
	"context"
	"fmt"

	"github.com/oklog/ulid/v2"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is what an enqueue checks against the tasks that exist:
// producer-chosen ids and dependencies (from memory, and from the file read
// before the lock), unique keys, and conflicts with tasks whose change is
// not durable yet.

// checkUniqueLocked fails when another task holds the unique key
// (broker.UniqueHolds).
func (e *Engine) checkUniqueLocked(uk string, now int64) error {
	if uk == "" {
		return nil
	}
	c, ok := e.unique[uk]
	if !ok {
		return nil
	}
	if e.uniqueHeldLocked(c, now) {
		return fmt.Errorf("unique_key %q is held by task %s: %w", uk, c.k, broker.ErrAlreadyExists)
	}
	return nil
}

// notDurableLocked reports whether task k is known from memory only: it is
// live and its enqueue is not durable yet, or it has just left memory and
// that change (perhaps its enqueue too) is not durable yet. A conflict with
// such a task waits for its commit: if that commit fails, the task never
// existed.
func (e *Engine) notDurableLocked(k key) bool {
	if m, live := e.tasks.get(k); live {
		return m.flags&flagCommitted == 0
	}
	_, settling := e.settling[k]
	return settling
}

// uniqueNotDurableLocked reports whether the unique key is held by a task
// whose enqueue is not durable yet.
func (e *Engine) uniqueNotDurableLocked(uk string, now int64) bool {
	if uk == "" {
		return false
	}
	c, ok := e.unique[uk]
	if !ok || !e.uniqueHeldLocked(c, now) {
		return false
	}
	m, _ := e.tasks.get(c.k)
	return m.flags&flagCommitted == 0
}

// uniqueHeldLocked reports whether claim c still holds at now: its task is
// live (the state the contract's rule reads; a task that left memory is
// terminal or gone) and its TTL has not passed.
func (e *Engine) uniqueHeldLocked(c uniqueClaim, now int64) bool {
	var s broker.State
	if m, live := e.tasks.get(c.k); live {
		s = m.state
	}
	return broker.UniqueHolds(s, fromNanos(c.until), fromNanos(now))
}

// existsLookup answers "does a task with this id exist?" for producer-chosen
// ids: live and settling tasks from memory, terminal ones from what
// lockForEnqueue read of the file.
type existsLookup struct {
	e    *Engine
	file *fileRead
}

// lockForEnqueue reads from the file what the checks of pend may need
// (whether each producer-chosen id and each dependency has a spec, the
// terminal status of each dependency; for an EnqueueTx, the terminal
// status and spec of each producer-chosen id too, for its answer) and takes
// Engine.mu (see lockAndRead). It returns with the mutex held, or with an
// error and the mutex not held.
func (e *Engine) lockForEnqueue(ctx context.Context, pend []pendingTask, tx bool) (*existsLookup, error) {
	var ids, done, full []key
	for i := range pend {
		pt := &pend[i]
		if pt.err != nil {
			continue
		}
		if pt.nt.ID != "" {
			ids = append(ids, pt.k)
			if tx {
				done, full = append(done, pt.k), append(full, pt.k)
			}
		}
		for _, d := range pt.nt.DependsOn {
			if k, err := ulid.ParseStrict(d.TaskID); err == nil {
				ids, done = append(ids, k), append(done, k)
			}
		}
	}
	r, err := e.lockAndRead(ctx, ids, done, full)
	if err != nil {
		return nil, err
	}
	return &existsLookup{e: e, file: r}, nil
}

func (l *existsLookup) exists(k key) (bool, error) {
	if _, ok := l.e.tasks.get(k); ok {
		return true, nil
	}
	if s, ok := l.e.settling[k]; ok {
		// A task deleted, not durably yet, is gone: a new task's write
		// with its id would follow the delete's in the file.
		return s.state != 0, nil
	}
	spec, ok := l.file.specs[k]
	if !ok {
		return false, fmt.Errorf("task %s was not read from the file", k)
	}
	return spec, nil
}

// done returns a lookup of terminal statuses (for dependencies).
func (l *existsLookup) done() *doneLookup { return &doneLookup{file: l.file} }
