package postgres

import (
	"context"
	"fmt"

	"github.com/conveyor-dev/conveyor/broker"
)

// Act applies an operator action to each task on its own; see
// broker.Broker. One transaction acts on every task of the call, each on
// its row locked, in the order given.
func (e *Engine) Act(ctx context.Context, p broker.ActParams) ([]broker.ActResult, error) {
	now := nanos(p.Now)
	var res []broker.ActResult
	err := e.inTx(ctx, func(t *txn) error {
		res = make([]broker.ActResult, len(p.IDs))
		for i, id := range p.IDs {
			lt, err := t.loadLive(ctx, id)
			if err != nil {
				return err
			}
			switch {
			case lt == nil:
				res[i].Err = fmt.Errorf("task %s: %w", id, broker.ErrNotFound)
			case p.From != broker.StateUnspecified && lt.state != p.From:
				res[i].Err = fmt.Errorf("task %s is %s now, no longer %s: %w", id, lt.state, p.From, broker.ErrInvalidState)
			case !p.Action.Applies(lt.state):
				res[i].Err = fmt.Errorf("task %s is %s: it cannot be %s: %w", id, lt.state, pastTense(p.Action), broker.ErrInvalidState)
			default:
				res[i], err = t.act(ctx, p.Action, lt, now)
				if err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func pastTense(a broker.Action) string {
	switch a {
	case broker.ActionCancel:
		return "canceled"
	case broker.ActionDelete:
		return "deleted"
	case broker.ActionRun:
		return "run now"
	}
	return "archived"
}

// act applies action a to lt, to whose state it applies.
func (t *txn) act(ctx context.Context, a broker.Action, lt *liveTask, now int64) (broker.ActResult, error) {
	switch a {
	case broker.ActionCancel:
		if lt.state == broker.StateActive {
			_, err := t.exec(ctx, `UPDATE conveyor_tasks SET canceled = true WHERE id = $1`, lt.id)
			running := broker.LapsedLease{SessionID: lt.session, Lease: broker.LeaseRef{TaskID: lt.id, Token: uint64(lt.token)}}
			t.canceledRunning = append(t.canceledRunning, running)
			return broker.ActResult{Running: &running}, err
		}
		return broker.ActResult{}, t.finish(ctx, lt, broker.StateCanceled, now, finishFields{})
	case broker.ActionRun:
		return t.run(ctx, lt, now)
	case broker.ActionArchive:
		msg := broker.ArchivedByOperator
		return broker.ActResult{}, t.finish(ctx, lt, broker.StateArchived, now, finishFields{lastError: &msg})
	}
	return broker.ActResult{}, t.deleteTask(ctx, lt, now)
}

// run makes lt PENDING now (RunTask): a BLOCKED task forgets its
// dependencies; an ARCHIVED or CANCELED one keeps its retry count, loses
// its expiry (its deadline still holds), and takes its unique key back
// unless another task holds it now (ErrAlreadyExists).
func (t *txn) run(ctx context.Context, lt *liveTask, now int64) (broker.ActResult, error) {
	if lt.state == broker.StateBlocked {
		if _, err := t.exec(ctx, `UPDATE conveyor_tasks SET waiting = 0, dep_failed = false WHERE id = $1`, lt.id); err != nil {
			return broker.ActResult{}, err
		}
		if _, err := t.exec(ctx, `UPDATE conveyor_deps SET resolved = true WHERE task_id = $1`, lt.id); err != nil {
			return broker.ActResult{}, err
		}
	}
	if lt.state.Terminal() {
		if lt.unique != "" {
			var until int64
			if err := t.queryRow(ctx, `SELECT unique_until FROM conveyor_tasks WHERE id = $1`, lt.id).Scan(&until); err != nil {
				return broker.ActResult{}, err
			}
			holder, err := t.claimUnique(ctx, lt.unique, lt.id, until, now)
			if err != nil {
				return broker.ActResult{}, err
			}
			if holder != "" {
				return broker.ActResult{Err: fmt.Errorf("unique_key %q is held by task %s: %w", lt.unique, holder, broker.ErrAlreadyExists)}, nil
			}
		}
		lt.expiresAt, lt.expireAt = 0, lt.deadline
		if _, err := t.exec(ctx, `UPDATE conveyor_tasks SET completed_at = 0, purge_at = NULL, expires_at = 0,
			expire_at = nullif(deadline, 0) WHERE id = $1`, lt.id); err != nil {
			return broker.ActResult{}, err
		}
	}
	return broker.ActResult{}, t.toPending(ctx, lt, now, pendingFields{})
}

// deleteTask removes lt (not ACTIVE) for good: it leaves its key and
// group, releases its unique key, and its dependents learn of it as of a
// canceled task.
func (t *txn) deleteTask(ctx context.Context, lt *liveTask, now int64) error {
	if !lt.state.Terminal() {
		if err := t.leave(ctx, lt); err != nil {
			return err
		}
		if lt.unique != "" {
			if _, err := t.exec(ctx, `DELETE FROM conveyor_unique WHERE key = $1 AND task_id = $2`, lt.unique, lt.id); err != nil {
				return err
			}
		}
	}
	if _, err := t.exec(ctx, `DELETE FROM conveyor_tasks WHERE id = $1`, lt.id); err != nil {
		return err
	}
	if _, err := t.exec(ctx, `DELETE FROM conveyor_deps WHERE task_id = $1`, lt.id); err != nil {
		return err
	}
	t.moved(lt.queue, lt.state, 0, lt.ready(), false)
	if lt.state.Terminal() || !lt.hasDependents {
		return nil
	}
	return t.resolveDependents(ctx, lt.id, broker.StateCanceled, now)
}
