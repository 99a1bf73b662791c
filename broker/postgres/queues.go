package postgres

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is queues: their rows (pause flag, configuration), their
// totals, and forgetting one.

// info is q as the contract describes it.
func (q *queueHint) info() broker.QueueInfo {
	return broker.QueueInfo{Name: q.name, Paused: q.paused, Config: q.cfg, Enqueued: q.enqueued, Counts: q.counts,
		Processed: q.processed, Failed: q.failed, Expired: q.expired}
}

// Queues lists every known queue; see broker.Broker.
func (e *Engine) Queues(context.Context) ([]broker.QueueInfo, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errClosed
	}
	out := make([]broker.QueueInfo, 0, len(e.hints.queues))
	for _, q := range e.hints.queues {
		out = append(out, q.info())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Queue describes one queue; see broker.Broker.
func (e *Engine) Queue(_ context.Context, name string) (broker.QueueInfo, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return broker.QueueInfo{}, errClosed
	}
	if q := e.hints.queues[name]; q != nil {
		return q.info(), nil
	}
	return broker.QueueInfo{Name: name}, nil
}

// SetQueuePaused pauses or resumes a queue, durably; see broker.Broker.
func (e *Engine) SetQueuePaused(ctx context.Context, name string, paused bool) (broker.QueueInfo, error) {
	err := e.inTx(ctx, func(t *txn) error {
		_, err := t.exec(ctx, `INSERT INTO conveyor_queues (name, paused) VALUES ($1, $2)
			ON CONFLICT (name) DO UPDATE SET paused = excluded.paused`, name, paused)
		return err
	})
	if err != nil {
		return broker.QueueInfo{}, err
	}
	e.events.configChanged(name)
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.queueLocked(name)
	was := q.paused
	q.paused = paused
	if was && !paused && (e.dispatchableLocked(q, e.cfg.Now()) > 0 || len(q.fired) > 0) {
		e.note.TasksReady(name)
	}
	return q.info(), nil
}

// UpdateQueueConfig changes a queue's configuration, durably; see
// broker.Broker. The queue's row is locked while update runs, so no other
// change comes between its read and its write; its rate bucket is carried
// over to the new rate (reconfigure) in the same write.
func (e *Engine) UpdateQueueConfig(ctx context.Context, name string, update func(*broker.QueueConfig)) (broker.QueueInfo, error) {
	var old, cfg broker.QueueConfig
	now := e.cfg.Now()
	clockStart := e.clockStart()
	err := e.inTx(ctx, func(t *txn) error {
		t.createQueues([]string{name})
		var delay, grace, pushTimeout int64
		var b broker.RateBucket[int64]
		if err := t.queryRow(ctx, `SELECT concurrency_limit, max_active, rate_per_second, rate_burst, group_max_size,
			group_max_delay, group_grace, max_waiting, push_url, push_concurrency, push_timeout,
			rate_tokens, rate_last, rate_held, rate_held_until, rate_holder
			FROM conveyor_queues WHERE name = $1 FOR UPDATE`, name).Scan(
			&old.ConcurrencyLimit, &old.MaxActive, &old.RatePerSecond, &old.RateBurst, &old.Group.MaxSize, &delay, &grace,
			&old.MaxWaiting, &old.Push.URL, &old.Push.Concurrency, &pushTimeout,
			&b.Tokens, &b.Last, &b.Held, &b.HeldUntil, &b.Holder); err != nil {
			return err
		}
		old.Group.MaxDelay, old.Group.GracePeriod = durationOf(delay), durationOf(grace)
		old.Push.Timeout = durationOf(pushTimeout)
		cfg = old
		update(&cfg)
		reconfigure(&b, clockStart, now, old, cfg)
		if _, err := t.exec(ctx, `UPDATE conveyor_queues SET concurrency_limit = $2, max_active = $3, rate_per_second = $4,
			rate_burst = $5, group_max_size = $6, group_max_delay = $7, group_grace = $8, max_waiting = $9,
			rate_tokens = $10, rate_last = $11, push_url = $12, push_concurrency = $13, push_timeout = $14 WHERE name = $1`,
			name, cfg.ConcurrencyLimit, cfg.MaxActive, cfg.RatePerSecond, cfg.RateBurst, cfg.Group.MaxSize,
			int64(cfg.Group.MaxDelay), int64(cfg.Group.GracePeriod), cfg.MaxWaiting, b.Tokens, b.Last,
			cfg.Push.URL, cfg.Push.Concurrency, int64(cfg.Push.Timeout)); err != nil {
			return err
		}
		if cfg.KeyLimit() > old.KeyLimit() {
			if err := t.limitRaised(ctx, name); err != nil {
				return err
			}
		}
		t.after = append(t.after, func() { e.configChanged(name, old, cfg, now) })
		return t.policyChanged(ctx, name, cfg.Group.WithDefaults(e.cfg.GroupDefaults))
	})
	if err != nil {
		return broker.QueueInfo{}, err
	}
	return e.Queue(ctx, name)
}

// configChanged applies a queue's new configuration, made at now, to the
// hints: its rate bucket keeps what it holds under the new rate (as the
// database's did), and a queue with more room than before wakes its
// sessions.
func (e *Engine) configChanged(name string, old, cfg broker.QueueConfig, now time.Time) {
	e.events.configChanged(name)
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.queueLocked(name)
	before := e.dispatchableLocked(q, now)
	q.cfg = cfg
	e.rateChangedLocked(q, now, old)
	e.boundChangedLocked(q, old.MaxWaiting)
	if !q.paused && before == 0 && (e.dispatchableLocked(q, now) > 0 || len(q.fired) > 0) {
		e.note.TasksReady(name)
	}
}

// DeleteQueue forgets an empty queue, durably; see broker.Broker.
func (e *Engine) DeleteQueue(ctx context.Context, name string) error {
	err := e.inTx(ctx, func(t *txn) error {
		var exists bool
		if err := t.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM conveyor_queues WHERE name = $1 FOR UPDATE)`, name).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			return fmt.Errorf("queue %q: %w", name, broker.ErrNotFound)
		}
		if err := t.deletable(ctx, name); err != nil {
			return err
		}
		for _, sql := range []string{
			`DELETE FROM conveyor_queues WHERE name = $1`,
			`DELETE FROM conveyor_queue_totals WHERE queue = $1`,
			`DELETE FROM conveyor_groups WHERE queue = $1`,
			`DELETE FROM conveyor_ckeys WHERE queue = $1`,
			`DELETE FROM conveyor_history WHERE queue = $1`,
		} {
			if _, err := t.exec(ctx, sql, name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	e.events.configChanged(name)
	e.mu.Lock()
	if q := e.hints.queues[name]; q != nil && q.cfg.MaxWaiting > 0 {
		e.hints.bounded--
	}
	delete(e.hints.queues, name)
	delete(e.hints.rateWaits, name)
	e.mu.Unlock()
	return nil
}

// deletable refuses the deletion of a queue that holds tasks (in any
// state) or that a cron entry enqueues into, saying what is left.
func (t *txn) deletable(ctx context.Context, name string) error {
	rows, err := t.query(ctx, `SELECT state, count(*) FROM conveyor_tasks WHERE queue = $1 GROUP BY state ORDER BY state`, name)
	if err != nil {
		return err
	}
	var total int64
	var parts []string
	for rows.Next() {
		var state int16
		var n int64
		if err := rows.Scan(&state, &n); err != nil {
			rows.Close()
			return err
		}
		total += n
		parts = append(parts, fmt.Sprintf("%d %s", n, broker.State(state)))
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if total != 0 {
		return fmt.Errorf("queue %q still holds %d %s (%s); delete them first: %w",
			name, total, plural(total, "task", "tasks"), strings.Join(parts, ", "), broker.ErrInvalidState)
	}
	rows, err = t.query(ctx, `SELECT id FROM conveyor_crons WHERE queue = $1 ORDER BY id`, name)
	if err != nil {
		return err
	}
	crons, err := collectStrings(rows)
	if err != nil {
		return err
	}
	if len(crons) > 0 {
		for i, id := range crons {
			crons[i] = fmt.Sprintf("%q", id)
		}
		return fmt.Errorf("queue %q is the queue of cron %s %s, whose next fire would bring it back; delete or change %s first: %w",
			name, plural(int64(len(crons)), "entry", "entries"), strings.Join(crons, ", "),
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
