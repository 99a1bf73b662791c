package postgres

import (
	"context"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is concurrency keys. A key's row in conveyor_ckeys counts its
// tasks that are admitted (in the queue's ready line, or ACTIVE), at most
// the queue's concurrency limit, and those ACTIVE; the rest of its PENDING
// tasks are held (held), in the key's own line by priority then FIFO, so
// they never block the tasks behind them. Every change to a key's counts
// is made under its row's lock.

// keyRow locks (creating it) the row of key of queue and returns its
// counts, and the queue's configuration as far as its keys' rules read it
// (its concurrency limit, as stored).
func (t *txn) keyRow(ctx context.Context, queue, key string) (admitted, active int, cfg broker.QueueConfig, err error) {
	err = t.queryRow(ctx, `WITH k AS (
			INSERT INTO conveyor_ckeys AS c (queue, key) VALUES ($1, $2)
			ON CONFLICT (queue, key) DO UPDATE SET admitted = c.admitted
			RETURNING admitted, active)
		SELECT k.admitted, k.active, coalesce((SELECT concurrency_limit FROM conveyor_queues WHERE name = $1), 0) FROM k`,
		queue, key).Scan(&admitted, &active, &cfg.ConcurrencyLimit)
	return admitted, active, cfg, err
}

// admit decides whether task id, just made PENDING (and not held), may
// enter its queue's ready line now (it counts as admitted) or waits in its
// key's line (it is marked held), by broker.QueueConfig.KeyAdmits. A task
// without a key is always ready.
func (t *txn) admit(ctx context.Context, queue, key, id string) (bool, error) {
	if key == "" {
		return true, nil
	}
	admitted, _, cfg, err := t.keyRow(ctx, queue, key)
	if err != nil {
		return false, err
	}
	if cfg.KeyAdmits(admitted) {
		_, err := t.exec(ctx, `UPDATE conveyor_ckeys SET admitted = admitted + 1 WHERE queue = $1 AND key = $2`, queue, key)
		return true, err
	}
	_, err = t.exec(ctx, `UPDATE conveyor_tasks SET held = true WHERE id = $1`, id)
	return false, err
}

// unadmit counts a keyed task out of its key's admitted ones (it left the
// ready line other than by a lease, or left ACTIVE) and admits the next
// held tasks of the key while the limit allows, in the line's order.
func (t *txn) unadmit(ctx context.Context, queue, key string, wasActive bool) error {
	admitted, active, cfg, err := t.keyRow(ctx, queue, key)
	if err != nil {
		return err
	}
	admitted--
	if wasActive {
		active--
	}
	for cfg.KeyAdmits(admitted) {
		var id string
		err := t.queryRow(ctx, `UPDATE conveyor_tasks SET held = false, ready_seq = nextval('conveyor_ready_seq')
			WHERE id = (SELECT id FROM conveyor_tasks WHERE queue = $1 AND concurrency_key = $2 AND held
				ORDER BY priority DESC, ready_seq LIMIT 1 FOR UPDATE SKIP LOCKED)
			RETURNING id`, queue, key).Scan(&id)
		if isNoRows(err) {
			break
		}
		if err != nil {
			return err
		}
		admitted++
		t.moved(queue, broker.StatePending, broker.StatePending, false, true)
	}
	_, err = t.exec(ctx, `UPDATE conveyor_ckeys SET admitted = $3, active = $4 WHERE queue = $1 AND key = $2`,
		queue, key, max(admitted, 0), max(active, 0))
	return err
}

// leaseKeyed decides, for a keyed task popped from the ready line to be
// leased, whether it may start: not when its key already has as many
// ACTIVE tasks as the limit allows, which happens only when the limit
// was lowered after the key admitted it; it then goes back to the key's
// line (the caller marks it held); see broker.QueueConfig.KeyStarts. A
// task that starts counts as ACTIVE.
func (t *txn) leaseKeyed(ctx context.Context, queue, key string) (bool, error) {
	_, active, cfg, err := t.keyRow(ctx, queue, key)
	if err != nil {
		return false, err
	}
	if !cfg.KeyStarts(active) {
		_, err := t.exec(ctx, `UPDATE conveyor_ckeys SET admitted = admitted - 1 WHERE queue = $1 AND key = $2`, queue, key)
		return false, err
	}
	_, err = t.exec(ctx, `UPDATE conveyor_ckeys SET active = active + 1 WHERE queue = $1 AND key = $2`, queue, key)
	return true, err
}

// limitRaised admits held tasks of every key of queue while its new,
// higher limit allows.
func (t *txn) limitRaised(ctx context.Context, queue string) error {
	rows, err := t.query(ctx, `SELECT DISTINCT concurrency_key FROM conveyor_tasks WHERE queue = $1 AND held`, queue)
	if err != nil {
		return err
	}
	keys, err := collectStrings(rows)
	if err != nil {
		return err
	}
	for _, key := range keys {
		// Counting nothing out: unadmit with a task that is not there.
		if _, err := t.exec(ctx, `UPDATE conveyor_ckeys SET admitted = admitted + 1 WHERE queue = $1 AND key = $2`, queue, key); err != nil {
			return err
		}
		if err := t.unadmit(ctx, queue, key, false); err != nil {
			return err
		}
	}
	return nil
}
