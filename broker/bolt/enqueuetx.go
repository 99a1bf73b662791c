package bolt

import (
	"context"
	"errors"
	"fmt"

	"github.com/oklog/ulid/v2"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// This file is EnqueueTx: every item stored or none, all checked before
// anything changes. enqueue.go has what it shares with Enqueue.

// EnqueueTx stores all tasks or none; see broker.Broker.
func (e *Engine) EnqueueTx(ctx context.Context, p broker.EnqueueParams) ([]*broker.Task, error) {
	now := p.Now.UnixNano()
	pend := prepare(p.Tasks, now)
	for i := range pend {
		if pend[i].err != nil {
			return nil, fmt.Errorf("items[%d]: %w", i, pend[i].err)
		}
	}

	var lookup *existsLookup
	for {
		var err error
		if lookup, err = e.lockForEnqueue(ctx, pend, true); err != nil {
			return nil, err
		}
		err = e.checkTxLocked(pend, now, lookup)
		if err == nil && e.bounded > 0 {
			err = e.txRoomLocked(pend)
		}
		if err == nil {
			break
		}
		if !errors.Is(err, errNotDurable) {
			e.mu.Unlock()
			return nil, err
		}
		// An existing id or a held unique key names a task whose
		// enqueue is not durable yet: check again once it is (or the
		// batch failed and it is gone).
		holder := e.commit.syncPointLocked()
		e.mu.Unlock()
		if holder == nil {
			return nil, errors.New("bolt: a task not durable yet is in no batch")
		}
		if werr := e.commit.wait(ctx, holder); ctx.Err() != nil {
			return nil, werr
		}
	}
	for i := range pend {
		pt := &pend[i]
		if pt.existing {
			continue
		}
		if pt.nt.ID == "" {
			pt.k = e.newIDLocked(p.Now)
		}
		if pt.state == stateBlocked {
			// checkTxLocked checked every dependency; earlier items are
			// live by now.
			pt.deps, _ = e.checkDepsLocked(pt.nt.DependsOn, lookup.done())
		}
		e.insertLocked(pt, now)
	}
	b := e.queueInsertsLocked(pend)
	e.cascadeAtEnqueueLocked(pend, now)
	e.mu.Unlock()

	if b != nil {
		if err := e.commit.wait(ctx, b); err != nil {
			return nil, err
		}
	}
	if e.cfg.afterTxCommit != nil {
		e.cfg.afterTxCommit()
	}
	out := make([]*broker.Task, len(pend))
	for i := range pend {
		pt := &pend[i]
		if !pt.existing {
			out[i] = newTaskView(pt)
			continue
		}
		t, err := e.GetTask(ctx, pt.k.String())
		switch {
		case errors.Is(err, broker.ErrNotFound):
			// Deleted or purged since the call found it: the call
			// committed all the same, and answers with the task as it
			// found it.
			if t = pt.was; pt.dupOf > 0 {
				found := *out[pt.dupOf-1]
				t = &found
			}
		case err != nil:
			return nil, fmt.Errorf("items[%d]: read existing task %s: %w", i, pt.k, err)
		}
		t.Existed = true
		out[i] = t
	}
	return out, nil
}

// existingViewLocked is task k, found to exist by lookup, as an EnqueueTx
// item that names it answers should it be gone once the call can read it
// whole: its spec and status when it is terminal (lookup read them from
// the file), what memory knows when it is live.
func (e *Engine) existingViewLocked(k key, lookup *existsLookup) (*broker.Task, error) {
	if m, live := e.tasks.get(k); live {
		return &broker.Task{ID: k.String(), Queue: e.queues[m.queue].name, State: m.state, Priority: int32(m.prio),
			Retried: m.retried, MaxRetry: m.maxRetry}, nil
	}
	st, err := lookup.done().status(k)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("task %s exists, but no status of it was read", k)
	}
	spec := lookup.file.full[k]
	if spec == nil {
		spec = &storagev1.TaskSpec{}
	}
	return taskFrom(k, spec, st), nil
}

// checkTxLocked validates every item of an EnqueueTx before anything
// changes: ids that exist (or repeat within the call) become no-ops, and a
// unique key that is held, or claimed twice within the call, fails it all.
// An id or a unique key of a task not durable yet returns errNotDurable.
func (e *Engine) checkTxLocked(pend []pendingTask, now int64, lookup *existsLookup) error {
	seenIDs := map[key]bool{}
	firstOf := map[key]int{}
	seenKeys := map[string]int{}
	newQueues := map[string]bool{}
	for i := range pend {
		pend[i].existing, pend[i].was, pend[i].dupOf = false, nil, 0
	}
	for i := range pend {
		pt := &pend[i]
		if pt.nt.ID != "" {
			if seenIDs[pt.k] {
				pt.existing, pt.dupOf = true, firstOf[pt.k]+1
				continue
			}
			seenIDs[pt.k], firstOf[pt.k] = true, i
			if e.notDurableLocked(pt.k) {
				return errNotDurable
			}
			exists, err := lookup.exists(pt.k)
			if err != nil {
				return err
			}
			if exists {
				pt.existing = true
				if pt.was, err = e.existingViewLocked(pt.k, lookup); err != nil {
					return err
				}
				continue
			}
		}
		// The queues this call creates count against the limit together.
		if q := pt.nt.Queue; e.byName[q] == nil && !newQueues[q] {
			if e.liveQueuesLocked()+len(newQueues) >= maxQueues {
				return fmt.Errorf("items[%d]: %w", i, tooManyQueues(q))
			}
			newQueues[q] = true
		}
		if err := e.checkTxDepsLocked(pt, seenIDs, lookup); err != nil {
			return fmt.Errorf("items[%d]: %w", i, err)
		}
		uk := pt.nt.UniqueKey
		if uk == "" {
			continue
		}
		if j, dup := seenKeys[uk]; dup {
			return fmt.Errorf("items[%d] and items[%d] share unique_key %q: %w", j, i, uk, broker.ErrAlreadyExists)
		}
		seenKeys[uk] = i
		if e.uniqueNotDurableLocked(uk, now) {
			return errNotDurable
		}
		if err := e.checkUniqueLocked(uk, now); err != nil {
			return fmt.Errorf("items[%d]: %w", i, err)
		}
	}
	return nil
}

// errNotDurable is checkTxLocked's answer when an item conflicts with a
// task whose enqueue is not durable yet.
var errNotDurable = errors.New("conflict with a task not durable yet")

// checkTxDepsLocked checks that each dependency of an EnqueueTx item
// exists or is an earlier item of the call (seen).
func (e *Engine) checkTxDepsLocked(pt *pendingTask, seen map[key]bool, lookup *existsLookup) error {
	for i, d := range pt.nt.DependsOn {
		k, err := ulid.ParseStrict(d.TaskID)
		if err != nil {
			return fmt.Errorf("depends_on[%d]: task id %q is not a ULID: %w", i, d.TaskID, broker.ErrInvalidArgument)
		}
		if seen[k] && k != pt.k {
			continue
		}
		ok, err := lookup.exists(k)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("depends_on[%d]: task %s does not exist: %w", i, d.TaskID, broker.ErrInvalidArgument)
		}
	}
	return nil
}
