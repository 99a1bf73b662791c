package bolt

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// pending is one task of an enqueue call on its way into the engine.
type pendingTask struct {
	nt     *broker.NewTask
	k      key
	state  broker.State
	status *storagev1.TaskStatus
	// spec and statusBytes are the records as written, encoded before the
	// engine lock is taken.
	spec, statusBytes []byte
	// existing is set (EnqueueTx only) when the id already names a task;
	// was is that task as the call found it (its answer should the task
	// be gone by the time the call reads it whole), or dupOf, when the id
	// is an earlier item's of the call, that item's index + 1.
	existing bool
	was      *broker.Task
	dupOf    int
	// wait is set when the task's id or unique key conflicts with a task
	// whose enqueue is not durable yet: the task is tried again once that
	// commit ends (see notDurableLocked).
	wait bool
	// deps is what the task's dependencies say (BLOCKED tasks only).
	deps depStart
	err  error
}

// prepare encodes what can be encoded before the engine lock is taken, so
// that concurrent callers encode in parallel.
func prepare(tasks []broker.NewTask, now int64) []pendingTask {
	out := make([]pendingTask, len(tasks))
	for i := range tasks {
		nt := &tasks[i]
		p := &out[i]
		p.nt = nt
		if nt.ID != "" {
			k, err := parseKey(nt.ID)
			if err != nil {
				p.err = fmt.Errorf("task_id %q is not a ULID", nt.ID)
				continue
			}
			p.k = k
		}
		if err := checkNewTask(nt); err != nil {
			p.err = err
			continue
		}
		p.state = nt.State
		next := now
		if p.state == stateScheduled || p.state == stateBlocked && nanos(nt.ProcessAt) > now {
			// A BLOCKED task keeps its process time for its release.
			next = nanos(nt.ProcessAt)
		}
		p.status = &storagev1.TaskStatus{
			State:          int32(p.state),
			Queue:          nt.Queue,
			Type:           nt.Type,
			Priority:       nt.Priority,
			MaxRetry:       nt.MaxRetry,
			EnqueuedAt:     now,
			NextProcessAt:  next,
			UniqueKey:      nt.UniqueKey,
			UniqueUntil:    nanos(nt.UniqueUntil),
			ExpiresAt:      nanos(nt.ExpiresAt),
			Deadline:       nanos(nt.Deadline),
			Group:          nt.Group,
			ConcurrencyKey: nt.ConcurrencyKey,
			AtMostOnce:     nt.AtMostOnce,
		}
		if nt.Retention != nil {
			r := int64(*nt.Retention)
			p.status.Retention = &r
		}
		p.statusBytes = marshal(p.status)
		p.spec = marshal(specOf(nt))
	}
	return out
}

// checkNewTask refuses what the caller must have resolved: an initial
// state the engine does not start tasks in, a priority off the scale.
func checkNewTask(nt *broker.NewTask) error {
	switch nt.State {
	case statePending, stateScheduled, stateAggr, stateBlocked:
	default:
		return fmt.Errorf("a new task cannot start %s", nt.State)
	}
	if len(nt.DependsOn) > 0 && nt.State != stateBlocked {
		return fmt.Errorf("a new task with dependencies starts %s, not %s", stateBlocked, nt.State)
	}
	if nt.Priority < 1 || nt.Priority > 9 {
		return fmt.Errorf("priority %d is not 1..9", nt.Priority)
	}
	if nt.Queue == "" {
		return fmt.Errorf("a new task needs a queue")
	}
	return nil
}

// specOf is the immutable record of a new task.
func specOf(nt *broker.NewTask) *storagev1.TaskSpec {
	spec := &storagev1.TaskSpec{
		Queue:       nt.Queue,
		Type:        nt.Type,
		Payload:     nt.Payload,
		ContentType: nt.ContentType,
		Metadata:    nt.Metadata,
		Options:     nt.Options,
		Timeout:     int64(nt.Timeout),
		Deadline:    nanos(nt.Deadline),
	}
	if p := nt.RetryPolicy; p != nil {
		spec.RetryPolicy = &storagev1.RetryPolicyRecord{Strategy: int32(p.Strategy), Base: int64(p.Base), Max: int64(p.Max)}
	}
	for _, d := range nt.DependsOn {
		k, err := ulid.ParseStrict(d.TaskID)
		if err != nil {
			continue // the server checked every id
		}
		spec.DependsOn = append(spec.DependsOn, &storagev1.DependencyRecord{TaskId: k[:], OnFailure: int32(d.OnFailure)})
	}
	return spec
}

// Enqueue stores each task independently; see broker.Broker.
func (e *Engine) Enqueue(ctx context.Context, p broker.EnqueueParams) ([]broker.EnqueueResult, error) {
	now := p.Now.UnixNano()
	pend := prepare(p.Tasks, now)

	// Each round inserts what it can. A task whose id or unique key
	// conflicts with a task not durable yet waits for that commit and goes
	// again, so already_exists only ever names a task that is stored.
	res := make([]broker.EnqueueResult, len(pend))
	todo := make([]int, len(pend)) // indexes into pend still to try
	for i := range todo {
		todo[i] = i
	}
	var callErr error
	for len(todo) > 0 {
		round := make([]pendingTask, len(todo))
		for j, i := range todo {
			round[j] = pend[i]
		}
		lookup, err := e.lockForEnqueue(ctx, round, false)
		if err != nil {
			return nil, err
		}
		b := e.enqueueLocked(round, p.Now, lookup)
		var later []int
		var holder *batch // the holders' commits are at or before it
		for j := range round {
			if round[j].wait {
				later = append(later, todo[j])
			}
		}
		if len(later) > 0 {
			holder = e.commit.syncPointLocked()
		}
		e.mu.Unlock()

		if b != nil {
			err = e.commit.wait(ctx, b)
		}
		for j, i := range todo {
			switch pt := &round[j]; {
			case pt.wait:
			case pt.err != nil:
				res[i].Err = pt.err
			case err != nil:
				res[i].Err = err
			default:
				res[i].Task = newTaskView(pt)
			}
		}
		if err != nil {
			callErr = err
		}
		if len(later) == 0 {
			break
		}
		switch {
		case err != nil:
		case holder == nil: // cannot be: a task not durable is in a batch
			err = errors.New("bolt: a task not durable yet is in no batch")
		default:
			// Once it ends, each holder is stored, or gone (the batch
			// failed and memory was rebuilt from the file).
			if werr := e.commit.wait(ctx, holder); ctx.Err() != nil {
				err = werr
			}
		}
		if err != nil {
			for _, i := range later {
				res[i].Err = err
			}
			return res, err
		}
		todo = later
	}
	return res, callErr
}

// enqueueLocked inserts each prepared task that passes its checks (its id
// free, its queue within the limit, its unique key free, its dependencies
// known, room in its queue's bound) and queues their writes; it returns the batch to wait for (nil
// when nothing was inserted). Each task's error is left in pend. lookup is
// from lockForEnqueue.
func (e *Engine) enqueueLocked(pend []pendingTask, at time.Time, lookup *existsLookup) *batch {
	now := at.UnixNano()
	for i := range pend {
		pt := &pend[i]
		if pt.err != nil {
			continue
		}
		if pt.nt.ID == "" {
			pt.k = e.newIDLocked(at)
		} else if e.notDurableLocked(pt.k) {
			pt.wait = true
			continue
		} else if exists, err := lookup.exists(pt.k); err != nil {
			pt.err = err
			continue
		} else if exists {
			pt.err = fmt.Errorf("task %s: %w", pt.nt.ID, broker.ErrAlreadyExists)
			continue
		}
		if err := e.checkQueueLocked(pt.nt.Queue); err != nil {
			pt.err = err
			continue
		}
		if e.uniqueNotDurableLocked(pt.nt.UniqueKey, now) {
			pt.wait = true
			continue
		}
		if err := e.checkUniqueLocked(pt.nt.UniqueKey, now); err != nil {
			pt.err = err
			continue
		}
		if pt.state == stateBlocked {
			if pt.deps, pt.err = e.checkDepsLocked(pt.nt.DependsOn, lookup.done()); pt.err != nil {
				continue
			}
		}
		if e.bounded > 0 {
			// Last: a task refused for another reason is not one the
			// queue's room could let in.
			if pt.err = e.roomLocked(pt.nt.Queue, 1); pt.err != nil {
				continue
			}
		}
		e.insertLocked(pt, now)
	}
	b := e.queueInsertsLocked(pend)
	e.cascadeAtEnqueueLocked(pend, now)
	return b
}

// insertLocked adds a new task to the in-memory indexes. It is not
// dispatchable until its commit is durable (flagCommitted).
func (e *Engine) insertLocked(pt *pendingTask, now int64) {
	q := e.queueLocked(pt.nt.Queue)
	m := meta{
		due:      pt.status.GetNextProcessAt(),
		queue:    q.index,
		maxRetry: pt.nt.MaxRetry,
		state:    pt.state,
		prio:     uint8(pt.nt.Priority),
		kind:     e.kindLocked(pt.nt.Type, pt.nt.AtMostOnce),
	}
	q.counts[m.state]++
	q.enqueued++
	if m.state == stateScheduled {
		e.addDueLocked(pt.k, m.due)
	}
	if uk := pt.nt.UniqueKey; uk != "" {
		e.unique[uk] = uniqueClaim{k: pt.k, until: pt.status.GetUniqueUntil(), since: now}
		e.uniqOf[pt.k] = uk
	}
	if pt.status.Retention != nil {
		e.retention[pt.k] = pt.status.GetRetention()
	}
	if ck := pt.nt.ConcurrencyKey; ck != "" {
		e.keyOf[pt.k] = e.ckeyLocked(q, ck)
	}
	e.indexExpiryLocked(pt.k, &m, pt.status.GetExpiresAt(), pt.status.GetDeadline())
	if m.state == stateBlocked {
		e.startBlockedLocked(pt, &m, q)
	}
	e.tasks.put(pt.k, m)
}

// startBlockedLocked applies what a new BLOCKED task's dependencies say:
// it waits for those still running, starts as released (releaseState:
// PENDING, AGGREGATING when it has a group, joining the group once
// durable, or SCHEDULED until a process time still to come) when none is
// left, and carries a failure under ON_FAILURE_BLOCK. (A cascade cancel
// is applied once its insert is queued: cascadeAtEnqueueLocked.) The
// status changed, so it is encoded again.
func (e *Engine) startBlockedLocked(pt *pendingTask, m *meta, q *queue) {
	ds := pt.deps
	release := releaseState(pt.nt.Group != "", pt.status.GetNextProcessAt(), pt.status.GetEnqueuedAt())
	e.linkDepsLocked(pt.k, m, ds.waitingOn, release)
	if len(ds.waitingOn) > 0 && ds.endedAt > 0 {
		e.dependencyEndedLocked(pt.k, ds.endedAt)
	}
	pt.status.WaitingOn = ds.waitingOn
	if ds.failed != "" {
		m.flags |= flagDepFailed
		pt.status.DependencyFailed, pt.status.LastError = true, ds.failed
	} else if len(ds.waitingOn) == 0 && ds.cancel == "" {
		// The caller's Now was read before the engine lock, so it may
		// be older than a dependency's end: pending no earlier than that.
		to := release // SCHEDULED: its process time is after now
		m.due = max(m.due, ds.endedAt)
		if to == stateScheduled {
			pt.status.NextProcessAt = m.due
			e.addDueLocked(pt.k, m.due)
		}
		q.counts[m.state]--
		m.state, pt.state = to, to
		q.counts[m.state]++
		pt.status.State = int32(to)
	}
	pt.statusBytes = marshal(pt.status)
}

// cascadeAtEnqueueLocked cancels the new tasks a failed dependency cancels
// (ON_FAILURE_CASCADE_CANCEL), after their inserts are queued.
func (e *Engine) cascadeAtEnqueueLocked(pend []pendingTask, now int64) {
	for i := range pend {
		pt := &pend[i]
		if pt.err != nil || pt.existing || pt.wait || pt.deps.cancel == "" {
			continue
		}
		why := pt.deps.cancel
		if m, live := e.tasks.get(pt.k); live {
			e.finishLocked(pt.k, m, stateCanceled, now, func(st *storagev1.TaskStatus) { st.LastError = why })
			pt.state = stateCanceled
		}
	}
}

// queueInsertsLocked queues the writes of the inserted tasks and the hook
// that makes them dispatchable once durable. It returns nil when nothing
// was inserted. The write and the hook run after the caller may have
// returned (its context ended): they use copies, never the caller's tasks.
func (e *Engine) queueInsertsLocked(pend []pendingTask) *batch {
	var keys []key
	var queues []string
	var specs, statuses [][]byte
	var indexed, dependents [][]byte
	type member struct {
		k          key
		name, typ  string
		size       int
		enqueuedAt int64
	}
	var grouped []member
	for i := range pend {
		pt := &pend[i]
		if pt.err != nil || pt.existing || pt.wait {
			continue
		}
		keys = append(keys, pt.k)
		queues = append(queues, pt.nt.Queue)
		if pt.state == stateAggr {
			grouped = append(grouped, member{pt.k, pt.nt.Group, pt.nt.Type, len(pt.spec), pt.status.GetEnqueuedAt()})
		}
		specs = append(specs, pt.spec)
		statuses = append(statuses, pt.statusBytes)
		indexed = append(indexed, indexKey(pt.nt.Queue, pt.state, pt.nt.Type, pt.k))
		for _, d := range pt.nt.DependsOn {
			if dk, err := ulid.ParseStrict(d.TaskID); err == nil {
				dependents = append(dependents, append(dk[:], pt.k[:]...))
			}
		}
	}
	if len(keys) == 0 {
		return nil
	}
	write := func(w *txw) error {
		for i := range keys {
			k := keys[i][:]
			if err := w.tasks.Put(k, specs[i]); err != nil {
				return err
			}
			if err := w.live.Put(k, statuses[i]); err != nil {
				return err
			}
			if err := w.index.Put(indexed[i], nil); err != nil {
				return err
			}
		}
		for _, k := range dependents {
			if err := w.dependents.Put(k, nil); err != nil {
				return err
			}
		}
		for _, q := range queues {
			w.delta(q).enqueued++
		}
		return nil
	}
	publish := func() {
		for _, k := range keys {
			m, ok := e.tasks.get(k)
			if !ok {
				continue
			}
			m.flags |= flagCommitted
			e.tasks.put(k, m)
			if m.state == statePending {
				e.pushReadyLocked(k)
			}
		}
		for _, g := range grouped {
			if m, ok := e.tasks.get(g.k); ok && m.state == stateAggr {
				e.joinGroupLocked(g.k, e.queues[m.queue], g.name, g.typ, g.size, g.enqueuedAt, g.enqueuedAt)
			}
		}
	}
	return e.commit.appendSyncLocked(write, publish)
}

// newTaskView is the Task an enqueue call returns for a task it stored.
func newTaskView(pt *pendingTask) *broker.Task {
	nt := pt.nt
	st := pt.status
	return &broker.Task{
		ID:             pt.k.String(),
		Queue:          nt.Queue,
		Type:           nt.Type,
		Payload:        nt.Payload,
		ContentType:    nt.ContentType,
		Metadata:       nt.Metadata,
		Options:        nt.Options,
		State:          pt.state,
		Priority:       nt.Priority,
		MaxRetry:       nt.MaxRetry,
		EnqueuedAt:     fromNanos(st.GetEnqueuedAt()),
		NextProcessAt:  fromNanos(st.GetNextProcessAt()),
		ExpiresAt:      fromNanos(st.GetExpiresAt()),
		Deadline:       fromNanos(st.GetDeadline()),
		Timeout:        nt.Timeout,
		RetryPolicy:    nt.RetryPolicy,
		Retention:      nt.Retention,
		UniqueKey:      nt.UniqueKey,
		Group:          nt.Group,
		ConcurrencyKey: nt.ConcurrencyKey,
		AtMostOnce:     nt.AtMostOnce,
		DependsOn:      withStates(nt.DependsOn, pt.deps.states),
	}
}

// withStates is deps with the states they had at enqueue.
func withStates(deps []broker.Dependency, states []broker.State) []broker.Dependency {
	if len(states) != len(deps) {
		return deps
	}
	out := make([]broker.Dependency, len(deps))
	for i, d := range deps {
		d.State = states[i]
		out[i] = d
	}
	return out
}
