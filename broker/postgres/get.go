package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// GetTask returns a task by id; see broker.Broker. Its dependencies carry
// their states, and its dependents (at most broker.MaxDependentsShown) are
// listed.
func (e *Engine) GetTask(ctx context.Context, id string) (*broker.Task, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	task, err := e.getTask(ctx, e.pool, id)
	if err != nil {
		return nil, e.storageError(err)
	}
	return task, nil
}

// getTask reads a task whole through q (a pool or a transaction).
func (e *Engine) getTask(ctx context.Context, q querier, id string) (*broker.Task, error) {
	rows, err := q.Query(ctx, `SELECT `+taskColumns+` FROM conveyor_tasks t WHERE t.id = $1`, id)
	if err != nil {
		return nil, err
	}
	var task *broker.Task
	for rows.Next() {
		if task, err = scanTask(rows); err != nil {
			rows.Close()
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if task == nil {
		return nil, fmt.Errorf("task %s: %w", id, broker.ErrNotFound)
	}
	if err := fillDeps(ctx, q, []*broker.Task{task}, true); err != nil {
		return nil, err
	}
	rows, err = q.Query(ctx, `SELECT d.task_id, t.state FROM conveyor_deps d JOIN conveyor_tasks t ON t.id = d.task_id
		WHERE d.dep_id = $1 ORDER BY d.task_id LIMIT $2`, id, broker.MaxDependentsShown)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var l broker.TaskLink
		var state int16
		if err := rows.Scan(&l.TaskID, &state); err != nil {
			return nil, err
		}
		l.State = broker.State(state)
		task.Dependents = append(task.Dependents, l)
	}
	return task, rows.Err()
}

// inTxOpen is inTx for Open, whose hints are not loaded yet: what the
// transaction did is not applied to them.
func (e *Engine) inTxOpen(ctx context.Context, fn func(t *txn) error) error {
	t, err := e.begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(t); err != nil {
		_ = t.tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	if err := t.flush(ctx); err != nil {
		_ = t.tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	return t.tx.Commit(ctx)
}

// isLeaseLost reports whether err says a lease is no longer current.
func isLeaseLost(err error) bool { return errors.Is(err, broker.ErrLeaseLost) }

// durationOf is a stored duration.
func durationOf(ns int64) time.Duration { return time.Duration(ns) }
