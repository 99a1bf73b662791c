package postgres

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file reads a database whole for a copy (and reads back a copy's
// load, for its check), in the copy's transaction.

// CopyQueues lists every queue: the queue rows, their totals, and the
// tasks per state.
func (s *CopyStore) CopyQueues(ctx context.Context) ([]broker.QueueInfo, error) {
	byName := map[string]*broker.QueueInfo{}
	queue := func(name string) *broker.QueueInfo {
		q := byName[name]
		if q == nil {
			q = &broker.QueueInfo{Name: name}
			byName[name] = q
		}
		return q
	}
	rows, err := s.tx.Query(ctx, `SELECT name, paused, concurrency_limit, max_active, rate_per_second, rate_burst,
		group_max_size, group_max_delay, group_grace, max_waiting, push_url, push_concurrency, push_timeout
		FROM conveyor_queues`)
	if err != nil {
		return nil, err
	}
	var name string
	var paused bool
	var cfg broker.QueueConfig
	var delay, grace, pushTimeout int64
	_, err = pgx.ForEachRow(rows, []any{&name, &paused, &cfg.ConcurrencyLimit, &cfg.MaxActive, &cfg.RatePerSecond,
		&cfg.RateBurst, &cfg.Group.MaxSize, &delay, &grace, &cfg.MaxWaiting, &cfg.Push.URL, &cfg.Push.Concurrency,
		&pushTimeout}, func() error {
		q := queue(name)
		cfg.Group.MaxDelay, cfg.Group.GracePeriod = time.Duration(delay), time.Duration(grace)
		cfg.Push.Timeout = time.Duration(pushTimeout)
		q.Paused, q.Config = paused, cfg
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read conveyor_queues: %w", err)
	}
	rows, err = s.tx.Query(ctx, `SELECT queue, sum(enqueued)::bigint, sum(processed)::bigint, sum(failed)::bigint,
		sum(expired)::bigint FROM conveyor_queue_totals GROUP BY queue`)
	if err != nil {
		return nil, err
	}
	var t [4]int64
	_, err = pgx.ForEachRow(rows, []any{&name, &t[0], &t[1], &t[2], &t[3]}, func() error {
		q := queue(name)
		q.Enqueued, q.Processed, q.Failed, q.Expired = t[0], t[1], t[2], t[3]
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read conveyor_queue_totals: %w", err)
	}
	rows, err = s.tx.Query(ctx, `SELECT queue, state, count(*) FROM conveyor_tasks GROUP BY 1, 2`)
	if err != nil {
		return nil, err
	}
	var state int16
	var n int64
	_, err = pgx.ForEachRow(rows, []any{&name, &state, &n}, func() error {
		if !broker.State(state).Valid() {
			return fmt.Errorf("queue %q has %d tasks in state %d, which is not a state", name, n, state)
		}
		queue(name).Counts[state] += n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("count conveyor_tasks: %w", err)
	}
	out := make([]broker.QueueInfo, 0, len(byName))
	for _, q := range byName {
		out = append(out, *q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// CopyCrons lists the cron entries, by id.
func (s *CopyStore) CopyCrons(ctx context.Context) ([]broker.CronEntry, error) {
	rows, err := s.tx.Query(ctx, `SELECT `+cronColumns+` FROM conveyor_crons ORDER BY id`)
	if err != nil {
		return nil, err
	}
	var out []broker.CronEntry
	for rows.Next() {
		c, err := scanCron(rows)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// copyColumns are what a copy reads of a task beyond taskColumns: the
// unique claim's end, the cancel mark, the start's authorization, the
// purge time, the line order, the fire time of its group (when fired),
// the dependency failure, and its dependencies' edges.
const copyColumns = `, t.unique_until, t.canceled, t.start_authorized, coalesce(t.purge_at, 0), t.ready_seq,
	coalesce(g.fires_at, 0), t.dep_failed, d.ids, d.fails, d.resolved`

// CopyTasks calls fn with every task, in id order, from one statement
// whose rows stream in as fn takes them.
func (s *CopyStore) CopyTasks(ctx context.Context, fn func(t *broker.CopyTask) error) error {
	rows, err := s.tx.Query(ctx, `SELECT `+taskColumns+copyColumns+`
		FROM conveyor_tasks t
		LEFT JOIN conveyor_groups g ON g.gid = t.group_gid AND g.fired
		LEFT JOIN (SELECT task_id, array_agg(dep_id ORDER BY ord) AS ids, array_agg(on_failure ORDER BY ord) AS fails,
				array_agg(resolved ORDER BY ord) AS resolved
			FROM conveyor_deps GROUP BY task_id) d ON d.task_id = t.id
		ORDER BY t.id`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		t, err := scanCopyTask(rows)
		if err != nil {
			return err
		}
		if err := fn(t); err != nil {
			return err
		}
	}
	return rows.Err()
}

// scanCopyTask reads one row of taskColumns and copyColumns.
func scanCopyTask(rows pgx.Rows) (*broker.CopyTask, error) {
	var uniqueUntil, purgeAt, firedAt int64
	var depIDs []string
	var fails []int16
	var resolved []bool
	var ct broker.CopyTask
	task, err := scanTaskWith(rows, &uniqueUntil, &ct.CancelRequested, &ct.StartAuthorized, &purgeAt, &ct.Seq, &firedAt,
		&ct.DependencyFailed, &depIDs, &fails, &resolved)
	if err != nil {
		return nil, err
	}
	if len(fails) != len(depIDs) || len(resolved) != len(depIDs) {
		return nil, fmt.Errorf("task %s: its dependencies do not read whole", task.ID)
	}
	ct.Task = *task
	ct.UniqueUntil, ct.PurgeAt = fromNanos(uniqueUntil), fromNanos(purgeAt)
	if task.State == broker.StateAggregating {
		ct.GroupFiredAt = fromNanos(firedAt)
	}
	for i, id := range depIDs {
		d := broker.Dependency{TaskID: id, OnFailure: broker.OnFailure(fails[i])}
		ct.DependsOn = append(ct.DependsOn, d)
		if task.State == broker.StateBlocked && !resolved[i] {
			ct.WaitingOn = append(ct.WaitingOn, d)
		}
	}
	if task.State != broker.StateBlocked {
		ct.DependencyFailed = false
	}
	if task.State != broker.StateActive {
		ct.CancelRequested, ct.StartAuthorized = false, false
	}
	if !task.State.Terminal() {
		ct.PurgeAt = time.Time{}
	}
	return &ct, nil
}
