package bolt

import (
	"fmt"

	"github.com/oklog/ulid/v2"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// This file is task dependencies. A BLOCKED task counts the dependencies
// it still waits for (meta.waiting); each live dependency keeps the list
// of its waiting dependents (Engine.deps). When a dependency ends, only
// its own dependents are visited, in the same critical section and the
// same commit: a task with 10,000 dependents releases them in one commit,
// and the work is proportional to its dependents, never to the store.
// Cycles cannot form: a task may depend only on tasks that exist before it.

// depEdge is a dependent waiting for a dependency.
type depEdge struct {
	k         key
	onFailure broker.OnFailure
	// release is the state the dependent takes once its dependencies are
	// done (releaseState).
	release broker.State
	// gen is the dependent's incarnation (Engine.depGen): an edge of a
	// task that stopped waiting (run, finished, deleted) stays in its
	// dependency's list, and must not count for a later task given the
	// same id by its producer.
	gen uint32
}

// releaseState is the state a BLOCKED task takes once its dependencies
// are done: AGGREGATING when it has a group (it joins it then), SCHEDULED
// when it has a process time (a next_process_at after its enqueue; it is
// PENDING if that time has passed by its release), else PENDING.
func releaseState(grouped bool, nextProcessAt, enqueuedAt int64) broker.State {
	switch {
	case grouped:
		return stateAggr
	case nextProcessAt > enqueuedAt:
		return stateScheduled
	}
	return statePending
}

// depStart is what the dependencies of a new task say at enqueue.
type depStart struct {
	states    []broker.State                // each dependency's state, in order
	waitingOn []*storagev1.DependencyRecord // still to finish
	failed    string                        // a dependency failed under BLOCK: why
	cancel    string                        // a dependency failed under CASCADE_CANCEL: why
	endedAt   int64                         // when the last of those already ended ended (Unix ns)
}

// checkDepsLocked resolves a new task's dependencies: each must exist (in
// memory, settling, or terminal in the file); a completed one is satisfied
// at once; a failed one applies its policy now.
func (e *Engine) checkDepsLocked(deps []broker.Dependency, done *doneLookup) (depStart, error) {
	var ds depStart
	for i, d := range deps {
		k, err := ulid.ParseStrict(d.TaskID)
		if err != nil {
			return ds, fmt.Errorf("depends_on[%d]: task id %q is not a ULID: %w", i, d.TaskID, broker.ErrInvalidArgument)
		}
		var state broker.State
		if m, live := e.tasks.get(k); live {
			ds.waitingOn = append(ds.waitingOn, &storagev1.DependencyRecord{TaskId: k[:], OnFailure: int32(d.OnFailure)})
			ds.states = append(ds.states, m.state)
			continue
		} else if s, ok := e.settling[k]; ok {
			if s.state == 0 { // deleted, not durable yet
				return ds, fmt.Errorf("depends_on[%d]: task %s does not exist: %w", i, d.TaskID, broker.ErrInvalidArgument)
			}
			state = s.state
			ds.endedAt = max(ds.endedAt, s.at)
		} else {
			st, err := done.status(k)
			if err != nil {
				return ds, err
			}
			if st == nil {
				return ds, fmt.Errorf("depends_on[%d]: task %s does not exist: %w", i, d.TaskID, broker.ErrInvalidArgument)
			}
			state = stateOf(st)
			ds.endedAt = max(ds.endedAt, st.GetCompletedAt())
		}
		ds.states = append(ds.states, state)
		switch broker.DependencyOutcome(d.OnFailure, state) {
		case broker.DepCancels:
			ds.cancel = fmt.Sprintf("dependency %s ended %s", k, state)
		case broker.DepBlocks:
			if ds.failed == "" {
				ds.failed = fmt.Sprintf("dependency %s ended %s", k, state)
			}
		}
	}
	return ds, nil
}

// linkDepsLocked records a new BLOCKED task's edges.
func (e *Engine) linkDepsLocked(k key, m *meta, waitingOn []*storagev1.DependencyRecord, release broker.State) {
	gen := e.newDepGenLocked(k, len(waitingOn))
	for _, d := range waitingOn {
		e.addDepEdgeLocked(k, gen, d.GetTaskId(), d.GetOnFailure(), release)
	}
	m.waiting = uint16(len(waitingOn))
}

// newDepGenLocked gives BLOCKED task k, about to get n edges, a new
// incarnation, and returns it.
func (e *Engine) newDepGenLocked(k key, n int) uint32 {
	if n == 0 {
		return 0
	}
	e.depGens++
	e.depGen[k] = e.depGens
	return e.depGens
}

// leftBlockedLocked is called when task k leaves BLOCKED (its edges left
// in its dependencies' lists are stale from now on).
func (e *Engine) leftBlockedLocked(k key) {
	delete(e.depGen, k)
	delete(e.depEndedAt, k)
}

// dependencyEndedLocked notes that a dependency of BLOCKED task k ended
// at t (see Engine.depEndedAt).
func (e *Engine) dependencyEndedLocked(k key, t int64) {
	if t > e.depEndedAt[k] {
		e.depEndedAt[k] = t
	}
}

// addDepEdgeLocked records that task k, of incarnation gen, waits for the
// task whose binary id is on, and takes state release once done waiting.
func (e *Engine) addDepEdgeLocked(k key, gen uint32, on []byte, onFailure int32, release broker.State) {
	var dk key
	copy(dk[:], on)
	e.deps[dk] = append(e.deps[dk], depEdge{k: k, onFailure: broker.OnFailure(onFailure), release: release, gen: gen})
}

// resolveDependentsLocked tells the dependents of task k, which ended in
// state to, what that means for them: satisfied (it completed, or a
// dependent continues on failure), canceled in turn (cascade), or blocked
// for good (a BLOCK dependent of a failure). A dependent that is no longer
// BLOCKED (run by an operator, canceled, deleted) is skipped.
func (e *Engine) resolveDependentsLocked(k key, to broker.State, now int64) {
	e.cascadeLocked(e.dependentsFrameLocked(k, to), now)
}

// endFrame is a task that ended whose dependents are being resolved: one
// level of a cascade, which cascadeLocked walks with a stack of its own
// (a chain of a million dependents must not need a million calls deep).
type endFrame struct {
	k     key
	to    broker.State // the state k ended in
	why   string       // what a failed dependent is told
	edges []depEdge    // k's dependents
	next  int          // edges[next] is the next to resolve
}

// dependentsFrameLocked takes the dependents of k, which ended in state to.
func (e *Engine) dependentsFrameLocked(k key, to broker.State) endFrame {
	f := endFrame{k: k, to: to, edges: e.deps[k]}
	if len(f.edges) > 0 {
		delete(e.deps, k)
		f.why = fmt.Sprintf("dependency %s ended %s", k, to)
	}
	return f
}

// cascadeLocked resolves the dependents of the ended task of frame first,
// depth first: a dependent that ends in turn (a cascade cancel, or an
// expiry that passed while it was blocked) has its write queued and its
// own dependents resolved before the next dependent of its dependency is
// looked at. Each task's write is queued before its dependents' (their
// ops touch only their own records, so the order is free): a chain's ids
// rise along it, and bbolt puts rising keys into a node in linear time,
// where falling ones (each put moving every key put before it) took
// quadratic time, 13 s for 30,000 links.
func (e *Engine) cascadeLocked(first endFrame, now int64) {
	stack := []endFrame{first}
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.next == len(f.edges) {
			stack = stack[:len(stack)-1]
			continue
		}
		ed := f.edges[f.next]
		f.next++
		m, live := e.tasks.get(ed.k)
		if !live || m.state != stateBlocked || e.depGen[ed.k] != ed.gen {
			continue
		}
		outcome := broker.DependencyOutcome(ed.onFailure, f.to)
		failed := outcome == broker.DepBlocks
		why := f.why
		if outcome == broker.DepCancels {
			stack = append(stack, e.beginFinishLocked(ed.k, m, stateCanceled, now, func(st *storagev1.TaskStatus) { st.LastError = why }))
			continue
		}
		m.waiting--
		if failed {
			m.flags |= flagDepFailed
		}
		e.tasks.put(ed.k, m)
		dep, dependent, release := f.k, ed.k, m.waiting == 0 && m.flags&flagDepFailed == 0
		if release {
			if msg, expired := e.expiryPassedLocked(dependent, m, now); expired {
				e.countExpiredLocked(m.queue)
				stack = append(stack, e.beginFinishLocked(dependent, m, stateArchived, now, func(st *storagev1.TaskStatus) { st.LastError = msg }))
				continue
			}
		}
		update := func(st *storagev1.TaskStatus) {
			st.WaitingOn = dropDep(st.WaitingOn, dep)
			if failed {
				st.DependencyFailed, st.LastError = true, why
			}
		}
		if release {
			// Ready no earlier than any of its dependencies ended.
			at := max(now, e.depEndedAt[dependent])
			e.releaseLocked(dependent, m, ed.release, at, update)
			continue
		}
		e.dependencyEndedLocked(dependent, now)
		e.commit.appendLocked(func(w *txw) error { return w.updateLive(dependent, update) }, nil)
	}
}

// releaseLocked starts a BLOCKED task whose dependencies are all done in
// state to (see releaseState): a grouped task joins its group
// (AGGREGATING), a delayed one is SCHEDULED until its process time (its
// meta.due) if that is still to come, any other becomes PENDING. fn may
// change more of the stored status.
func (e *Engine) releaseLocked(k key, m meta, to broker.State, now int64, fn func(st *storagev1.TaskStatus)) {
	switch {
	case to == stateAggr:
		e.toAggregatingLocked(k, m, now, fn)
	case to == stateScheduled && m.due > now:
		e.toScheduledLocked(k, m, now, fn)
	default:
		e.toPendingLocked(k, m, now, fn)
	}
}

// toScheduledLocked makes a released task SCHEDULED until m.due, its
// process time (already its stored next_process_at), and queues its
// write. A task whose expiry passed is archived instead.
func (e *Engine) toScheduledLocked(k key, m meta, now int64, fn func(st *storagev1.TaskStatus)) {
	if e.expiredLocked(k, m, now) {
		return
	}
	e.setStateLocked(k, &m, stateScheduled)
	e.addDueLocked(k, m.due)
	e.writeStateLocked(k, stateScheduled, fn)
}

// toAggregatingLocked makes a released grouped task AGGREGATING now and
// queues its write; it joins its group once that write is durable (the
// group's name, type and the spec's size are read from the file there).
// It joins as of now: its group's delay and grace count from its release,
// not its enqueue. A task whose expiry passed is archived instead.
func (e *Engine) toAggregatingLocked(k key, m meta, now int64, fn func(st *storagev1.TaskStatus)) {
	if e.expiredLocked(k, m, now) {
		return
	}
	m.due = now
	e.setStateLocked(k, &m, stateAggr)
	var name, typ string
	var size int
	e.commit.appendLocked(func(w *txw) error {
		size = len(w.tasks.Get(k[:]))
		return w.updateLive(k, func(st *storagev1.TaskStatus) {
			st.State = int32(stateAggr)
			st.NextProcessAt = now
			name, typ = st.GetGroup(), st.GetType()
			if fn != nil {
				fn(st)
			}
		})
	}, func() {
		if m, live := e.tasks.get(k); live && m.state == stateAggr {
			e.joinGroupLocked(k, e.queues[m.queue], name, typ, size, now, now)
		}
	})
}

func dropDep(list []*storagev1.DependencyRecord, k key) []*storagev1.DependencyRecord {
	out := list[:0]
	for _, d := range list {
		if string(d.GetTaskId()) != string(k[:]) {
			out = append(out, d)
		}
	}
	return out
}
