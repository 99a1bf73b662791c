package postgres

import (
	"context"
	"fmt"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is task dependencies. conveyor_deps holds one edge per
// dependency of a task, for good (GetTask lists them); an edge is
// resolved once its dependency's end was applied to the dependent. A
// BLOCKED task counts the edges it still waits for (waiting). When a task
// ends, only its own dependents are visited.

// depStart is what the dependencies of a new task say at enqueue.
type depStart struct {
	states    []broker.State // each dependency's state, in order
	waitingOn []int          // indexes of the dependencies still to finish
	failed    string         // a dependency failed under BLOCK: why
	cancel    string         // a dependency failed under CASCADE_CANCEL: why
	endedAt   int64          // when the last of those already ended ended
}

// depWhy is what a dependent of a task that ended other than COMPLETED is
// told.
func depWhy(id string, to broker.State) string {
	return fmt.Sprintf("dependency %s ended %s", id, to)
}

// resolveNewDeps checks the dependencies of the new BLOCKED items: each
// must exist (a stored task, or an earlier item of the call); its row is
// locked until the call commits, so that it cannot end unseen. A
// completed one is satisfied at once, a failed one applies its policy
// now. An item's state follows: CANCELED (a cascade), BLOCKED (for good,
// or waiting), or the state it is released to.
func (t *txn) resolveNewDeps(ctx context.Context, items []newItem, now int64) error {
	var ids []string
	for i := range items {
		if it := &items[i]; it.err == nil {
			for _, d := range it.nt.DependsOn {
				ids = append(ids, d.TaskID)
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	found := map[string]depRow{}
	rows, err := t.query(ctx, `SELECT id, state, completed_at FROM conveyor_tasks WHERE id = ANY($1) ORDER BY id FOR SHARE`, ids)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		var state int16
		var completed int64
		if err := rows.Scan(&id, &state, &completed); err != nil {
			rows.Close()
			return err
		}
		found[id] = depRow{broker.State(state), completed}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	earlier := map[string]broker.State{}
	for i := range items {
		it := &items[i]
		if it.err == nil && len(it.nt.DependsOn) > 0 {
			it.err = it.deps.resolve(it.nt.DependsOn, func(id string) (depRow, bool) {
				if s, ok := earlier[id]; ok {
					return depRow{state: s}, true
				}
				r, ok := found[id]
				return r, ok
			})
			if it.err == nil {
				it.startBlocked(now)
			}
		}
		if it.err == nil {
			earlier[it.id] = it.state
		}
	}
	return nil
}

// depRow is a dependency as resolveNewDeps found it.
type depRow struct {
	state     broker.State
	completed int64
}

// resolve fills ds from the dependencies deps, looked up by find.
func (ds *depStart) resolve(deps []broker.Dependency, find func(string) (depRow, bool)) error {
	for i, d := range deps {
		r, ok := find(d.TaskID)
		if !ok {
			return fmt.Errorf("depends_on[%d]: task %s does not exist: %w", i, d.TaskID, broker.ErrInvalidArgument)
		}
		state, completed := r.state, r.completed
		ds.states = append(ds.states, state)
		if !state.Terminal() {
			ds.waitingOn = append(ds.waitingOn, i)
			continue
		}
		ds.endedAt = max(ds.endedAt, completed)
		switch broker.DependencyOutcome(d.OnFailure, state) {
		case broker.DepCancels:
			ds.cancel = depWhy(d.TaskID, state)
		case broker.DepBlocks:
			if ds.failed == "" {
				ds.failed = depWhy(d.TaskID, state)
			}
		}
	}
	return nil
}

// startBlocked sets a new BLOCKED item's state from what its dependencies
// say: canceled by a cascade, blocked for good by a failure, still
// waiting, or released.
func (it *newItem) startBlocked(now int64) {
	ds := &it.deps
	switch {
	case ds.cancel != "":
		it.state, it.lastError = broker.StateCanceled, ds.cancel
	case ds.failed != "":
		it.lastError = ds.failed
	case len(ds.waitingOn) == 0:
		it.state = it.release
		if it.state == broker.StateScheduled && it.due <= now {
			it.state = broker.StatePending
		}
		if it.state != broker.StateScheduled {
			// The caller's Now may be older than a dependency's end:
			// ready no earlier than that.
			it.due = max(now, ds.endedAt)
		}
	}
}

// linkDeps records a stored item's edges, and marks its dependencies as
// having a dependent.
func (t *txn) linkDeps(ctx context.Context, it *newItem) error {
	deps := it.nt.DependsOn
	if len(deps) == 0 {
		return nil
	}
	ids := make([]string, len(deps))
	ords := make([]int32, len(deps))
	fails := make([]int16, len(deps))
	resolved := make([]bool, len(deps))
	for i, d := range deps {
		ids[i], ords[i], fails[i] = d.TaskID, int32(i), int16(d.OnFailure)
		resolved[i] = it.deps.states[i].Terminal()
	}
	if _, err := t.exec(ctx, `INSERT INTO conveyor_deps (task_id, dep_id, ord, on_failure, resolved)
		SELECT $1, d, o, f, r FROM unnest($2::text[], $3::int4[], $4::int2[], $5::bool[]) AS u(d, o, f, r)
		ON CONFLICT DO NOTHING`, it.id, ids, ords, fails, resolved); err != nil {
		return err
	}
	_, err := t.exec(ctx, `UPDATE conveyor_tasks SET has_dependents = true WHERE id = ANY($1) AND NOT has_dependents`, ids)
	return err
}

// resolveDependents tells the dependents of task id, which ended in state
// to, what that means for them, depth first: satisfied (it completed, or
// a dependent continues on failure), canceled in turn (a cascade), or
// blocked for good (a BLOCK dependent of a failure). A dependent that is
// no longer BLOCKED (run by an operator, canceled, deleted) is skipped.
func (t *txn) resolveDependents(ctx context.Context, id string, to broker.State, now int64) error {
	type frame struct {
		id string
		to broker.State
	}
	stack := []frame{{id, to}}
	for len(stack) > 0 {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		rows, err := t.query(ctx, `UPDATE conveyor_deps SET resolved = true WHERE dep_id = $1 AND NOT resolved
			RETURNING task_id, on_failure`, f.id)
		if err != nil {
			return err
		}
		type edge struct {
			id        string
			onFailure broker.OnFailure
		}
		var edges []edge
		for rows.Next() {
			var e edge
			var of int16
			if err := rows.Scan(&e.id, &of); err != nil {
				rows.Close()
				return err
			}
			e.onFailure = broker.OnFailure(of)
			edges = append(edges, e)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		why := depWhy(f.id, f.to)
		// In reverse, so that the stack resolves them in their order.
		for i := len(edges) - 1; i >= 0; i-- {
			ed := edges[i]
			lt, err := t.loadLive(ctx, ed.id)
			if err != nil {
				return err
			}
			if lt == nil || lt.state != broker.StateBlocked {
				continue
			}
			outcome := broker.DependencyOutcome(ed.onFailure, f.to)
			failed := outcome == broker.DepBlocks
			if outcome == broker.DepCancels {
				if err := t.finish(ctx, lt, broker.StateCanceled, now, finishFields{lastError: &why}); err != nil {
					return err
				}
				if lt.hasDependents {
					stack = append(stack, frame{lt.id, broker.StateCanceled})
				}
				continue
			}
			ended, err := t.dependencyEnded(ctx, lt, failed, why, now)
			if err != nil {
				return err
			}
			if ended != 0 && lt.hasDependents {
				stack = append(stack, frame{lt.id, ended})
			}
		}
	}
	return nil
}

// dependencyEnded counts one dependency of BLOCKED task lt as done
// (failed, with why), and releases lt once none is left and none failed
// (archiving it instead when its expiry passed). It returns the state lt
// ended in when it ended (its dependents are then to resolve), else 0.
func (t *txn) dependencyEnded(ctx context.Context, lt *liveTask, failed bool, why string, now int64) (broker.State, error) {
	lt.waiting--
	lt.depFailed = lt.depFailed || failed
	var lastError *string
	if failed {
		lastError = &why
	}
	if lt.waiting > 0 || lt.depFailed {
		_, err := t.exec(ctx, `UPDATE conveyor_tasks SET waiting = $2, dep_failed = $3, last_error = coalesce($4, last_error) WHERE id = $1`,
			lt.id, lt.waiting, lt.depFailed, lastError)
		return 0, err
	}
	// Ready no earlier than any of its dependencies ended: decisions read
	// their Now before their transactions serialize, so the dependency
	// that releases lt may carry an older Now than one that ended before.
	var lastEnded int64
	if err := t.queryRow(ctx, `UPDATE conveyor_tasks SET waiting = 0 WHERE id = $1
		RETURNING (SELECT coalesce(max(d.completed_at), 0) FROM conveyor_deps e JOIN conveyor_tasks d ON d.id = e.dep_id
		WHERE e.task_id = $1)`, lt.id).Scan(&lastEnded); err != nil {
		return 0, err
	}
	if lt.expiredBy(now) {
		return broker.StateArchived, t.expire(ctx, lt, now)
	}
	return 0, t.release(ctx, lt, max(now, lastEnded))
}

// release starts BLOCKED task lt, whose dependencies are all done, in its
// release state: a grouped task joins its group (AGGREGATING), a delayed
// one is SCHEDULED until its process time if that is still to come, any
// other becomes PENDING.
func (t *txn) release(ctx context.Context, lt *liveTask, now int64) error {
	switch {
	case lt.release == broker.StateAggregating:
		return t.toAggregating(ctx, lt, now)
	case lt.release == broker.StateScheduled && lt.due > now:
		return t.toScheduled(ctx, lt, lt.due)
	}
	return t.toPending(ctx, lt, now, pendingFields{})
}
