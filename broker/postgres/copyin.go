package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file loads a copy: the queues, the tasks (with COPY, a batch at a
// time) and their dependency edges, the cron entries; then Seal builds
// the rows the engine derives from the tasks (copyseal.go).

var errNotTarget = errors.New("postgres: a store opened as a copy's source is read-only")

// LoadQueues stores the queues' rows and totals.
func (s *CopyStore) LoadQueues(ctx context.Context, queues []broker.QueueInfo) error {
	if !s.target {
		return errNotTarget
	}
	var names []string
	var paused []bool
	var limits, maxActive, rates, bursts, sizes, pushConc []int32
	var delays, graces, maxWaiting, pushTimeouts, enq, proc, fail, exp []int64
	var pushURLs []string
	for _, q := range queues {
		c := q.Config
		names, paused = append(names, q.Name), append(paused, q.Paused)
		limits, maxActive, rates, bursts = append(limits, c.ConcurrencyLimit), append(maxActive, c.MaxActive), append(rates, c.RatePerSecond), append(bursts, c.RateBurst)
		sizes, delays, graces = append(sizes, c.Group.MaxSize), append(delays, int64(c.Group.MaxDelay)), append(graces, int64(c.Group.GracePeriod))
		maxWaiting = append(maxWaiting, c.MaxWaiting)
		pushURLs, pushConc, pushTimeouts = append(pushURLs, c.Push.URL), append(pushConc, c.Push.Concurrency), append(pushTimeouts, int64(c.Push.Timeout))
		enq, proc, fail, exp = append(enq, q.Enqueued), append(proc, q.Processed), append(fail, q.Failed), append(exp, q.Expired)
	}
	if _, err := s.tx.Exec(ctx, `INSERT INTO conveyor_queues (name, paused, concurrency_limit, max_active, rate_per_second,
			rate_burst, group_max_size, group_max_delay, group_grace, max_waiting, push_url, push_concurrency, push_timeout)
		SELECT * FROM unnest($1::text[], $2::bool[], $3::int4[], $4::int4[], $5::int4[], $6::int4[], $7::int4[], $8::int8[],
			$9::int8[], $10::int8[], $11::text[], $12::int4[], $13::int8[])`,
		names, paused, limits, maxActive, rates, bursts, sizes, delays, graces, maxWaiting, pushURLs, pushConc, pushTimeouts); err != nil {
		return fmt.Errorf("load queues: %w", err)
	}
	if _, err := s.tx.Exec(ctx, `INSERT INTO conveyor_queue_totals (queue, shard, enqueued, processed, failed, expired)
		SELECT q, 0, e, p, f, x FROM unnest($1::text[], $2::int8[], $3::int8[], $4::int8[], $5::int8[]) AS u(q, e, p, f, x)`,
		names, enq, proc, fail, exp); err != nil {
		return fmt.Errorf("load queue totals: %w", err)
	}
	return nil
}

// taskCopyColumns are the columns LoadTasks fills; the others take their
// defaults (no group yet, not held, no lease, no dependents yet: Seal
// sets them).
var taskCopyColumns = []string{"id", "queue", "type", "state", "priority", "retried", "max_retry", "payload",
	"content_type", "metadata", "options", "enqueued_at", "due_at", "ready_seq", "started_at", "completed_at",
	"expires_at", "deadline", "expire_at", "timeout", "retention", "purge_at", "retry_strategy", "retry_base",
	"retry_max", "unique_key", "unique_until", "group_key", "concurrency_key", "canceled", "last_error", "errors",
	"result", "progress_percent", "progress_message", "spec_bytes", "waiting", "dep_failed", "release_state",
	"at_most_once", "start_authorized"}

// LoadTasks stores a batch of tasks and their dependency edges, with COPY.
func (s *CopyStore) LoadTasks(ctx context.Context, tasks []*broker.CopyTask) error {
	if !s.target {
		return errNotTarget
	}
	rows := make([][]any, 0, len(tasks))
	var deps, fired [][]any
	for _, t := range tasks {
		row, edges, err := s.taskRow(t)
		if err != nil {
			return fmt.Errorf("task %s: %w", t.ID, err)
		}
		rows, deps = append(rows, row), append(deps, edges...)
		if t.State == broker.StateAggregating && !t.GroupFiredAt.IsZero() {
			fired = append(fired, []any{t.ID, nanos(t.GroupFiredAt)})
		}
	}
	if _, err := s.tx.CopyFrom(ctx, pgx.Identifier{"conveyor_tasks"}, taskCopyColumns, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("COPY conveyor_tasks: %w", err)
	}
	if len(deps) > 0 {
		if _, err := s.tx.CopyFrom(ctx, pgx.Identifier{"conveyor_deps"}, []string{"task_id", "dep_id", "ord", "on_failure", "resolved"},
			pgx.CopyFromRows(deps)); err != nil {
			return fmt.Errorf("COPY conveyor_deps: %w", err)
		}
	}
	if len(fired) > 0 {
		if err := s.fireTable(ctx); err != nil {
			return err
		}
		if _, err := s.tx.CopyFrom(ctx, pgx.Identifier{"conveyor_copy_fired"}, []string{"id", "fired_at"}, pgx.CopyFromRows(fired)); err != nil {
			return fmt.Errorf("COPY conveyor_copy_fired: %w", err)
		}
	}
	return nil
}

// fireTable creates, once, the table of the members of fired groups
// (the transaction's own) that Seal makes groups of.
func (s *CopyStore) fireTable(ctx context.Context) error {
	_, err := s.tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS conveyor_copy_fired (id text COLLATE "C" PRIMARY KEY,
		fired_at bigint NOT NULL) ON COMMIT DROP`)
	return err
}

// taskRow is a task's row of taskCopyColumns, and its dependency edges'
// rows: an edge is resolved unless the task is BLOCKED and still waits for
// that dependency.
func (s *CopyStore) taskRow(t *broker.CopyTask) ([]any, [][]any, error) {
	switch {
	case !t.State.Valid():
		return nil, nil, fmt.Errorf("state %d is not a state", t.State)
	case t.Queue == "":
		return nil, nil, errors.New("no queue")
	case t.State == broker.StateAggregating && t.Group == "":
		return nil, nil, errors.New("AGGREGATING with no group")
	}
	if err := storableText(t); err != nil {
		return nil, nil, err
	}
	var metadata, errs []byte
	if len(t.Metadata) > 0 {
		metadata, _ = json.Marshal(t.Metadata) // a map of strings always encodes
	}
	if len(t.Errors) > 0 {
		stored := make([]attemptError, len(t.Errors))
		for i, e := range t.Errors {
			stored[i] = attemptError{Attempt: e.Attempt, Message: e.Message, At: nanos(e.At)}
		}
		errs, _ = json.Marshal(stored)
	}
	due, enq := nanos(t.NextProcessAt), nanos(t.EnqueuedAt)
	seq := t.Seq
	if seq == 0 && (t.State == broker.StatePending || t.State == broker.StateAggregating) {
		s.seq++
		seq = s.seq
	}
	var waiting int32
	var release broker.State
	edges, err := depEdges(t)
	if err != nil {
		return nil, nil, err
	}
	if t.State == broker.StateBlocked {
		waiting, release = int32(len(t.WaitingOn)), releaseState(t.Group != "", due, enq)
	}
	var retention, purgeAt, rbase, rmax *int64
	var rstrat *int16
	if t.Retention != nil {
		retention = ptr(int64(*t.Retention))
	}
	if t.State.Terminal() && !t.PurgeAt.IsZero() {
		purgeAt = ptr(nanos(t.PurgeAt))
	}
	if p := t.RetryPolicy; p != nil {
		rstrat, rbase, rmax = ptr(int16(p.Strategy)), ptr(int64(p.Base)), ptr(int64(p.Max))
	}
	var expireAt *int64
	if x := expireOf(nanos(t.ExpiresAt), nanos(t.Deadline)); x != 0 {
		expireAt = &x
	}
	specBytes := len(t.Payload) + len(t.Type) + len(t.ContentType) + len(t.Options) + len(metadata)
	row := []any{t.ID, t.Queue, t.Type, int16(t.State), int16(t.Priority), t.Retried, t.MaxRetry, nonNil(t.Payload),
		t.ContentType, jsonOrNull(metadata), t.Options, enq, due, seq, nanos(t.StartedAt), nanos(t.CompletedAt),
		nanos(t.ExpiresAt), nanos(t.Deadline), expireAt, int64(t.Timeout), retention, purgeAt, rstrat, rbase,
		rmax, nullString(t.UniqueKey), nanos(t.UniqueUntil), nullString(t.Group), nullString(t.ConcurrencyKey),
		t.CancelRequested && t.State == broker.StateActive, t.LastError, jsonOrNull(errs),
		t.Result, t.ProgressPercent, t.ProgressMessage, int32(specBytes), waiting,
		t.DependencyFailed && t.State == broker.StateBlocked, int16(release),
		t.AtMostOnce, t.StartAuthorized && t.AtMostOnce && t.State == broker.StateActive}
	return row, edges, nil
}

// depEdges is a task's rows of conveyor_deps: one per entry of its
// DependsOn, unresolved when the task is BLOCKED and WaitingOn names it.
func depEdges(t *broker.CopyTask) ([][]any, error) {
	if len(t.DependsOn) == 0 {
		if len(t.WaitingOn) > 0 && t.State == broker.StateBlocked {
			return nil, errors.New("it waits for dependencies it does not list")
		}
		return nil, nil
	}
	var left []broker.Dependency
	if t.State == broker.StateBlocked {
		left = append(left, t.WaitingOn...)
	}
	edges := make([][]any, len(t.DependsOn))
	for i, d := range t.DependsOn {
		resolved := true
		for j, w := range left {
			if w.TaskID == d.TaskID && w.OnFailure == d.OnFailure {
				resolved, left = false, append(left[:j], left[j+1:]...)
				break
			}
		}
		edges[i] = []any{t.ID, d.TaskID, int32(i), int16(d.OnFailure), resolved}
	}
	if len(left) > 0 {
		return nil, fmt.Errorf("it waits for dependency %s, which it does not list", left[0].TaskID)
	}
	return edges, nil
}

// storableText refuses a task whose text PostgreSQL cannot store: a NUL
// character (text and jsonb refuse it), or bytes that are not UTF-8. The
// copy then fails naming the task and the field, rather than the database
// refusing a whole batch.
func storableText(t *broker.CopyTask) error {
	fields := [][2]string{{"id", t.ID}, {"queue", t.Queue}, {"type", t.Type}, {"content type", t.ContentType},
		{"unique key", t.UniqueKey}, {"group", t.Group}, {"concurrency key", t.ConcurrencyKey},
		{"last error", t.LastError}, {"progress message", t.ProgressMessage}}
	for k, v := range t.Metadata {
		fields = append(fields, [2]string{"metadata", k}, [2]string{"metadata", v})
	}
	for _, e := range t.Errors {
		fields = append(fields, [2]string{"error history", e.Message})
	}
	for _, d := range t.DependsOn {
		fields = append(fields, [2]string{"dependency", d.TaskID})
	}
	return unstorable(fields)
}

// unstorable says which of the (name, text) fields PostgreSQL cannot
// store, if any.
func unstorable(fields [][2]string) error {
	for _, f := range fields {
		if strings.IndexByte(f[1], 0) >= 0 || !utf8.ValidString(f[1]) {
			return fmt.Errorf("its %s %q holds a NUL character or bytes that are not UTF-8, which PostgreSQL does not store", f[0], f[1])
		}
	}
	return nil
}

// jsonOrNull is b for a jsonb column, NULL when empty.
func jsonOrNull(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// LoadCrons stores the cron entries, run history included.
func (s *CopyStore) LoadCrons(ctx context.Context, crons []broker.CronEntry) error {
	if !s.target {
		return errNotTarget
	}
	rows := make([][]any, 0, len(crons))
	for _, c := range crons {
		if c.ID == "" {
			return errors.New("a cron entry without an id")
		}
		fields := [][2]string{{"id", c.ID}, {"spec", c.Spec}, {"queue", c.Queue}, {"type", c.Type},
			{"content type", c.ContentType}, {"last task id", c.LastTaskID}, {"last error", c.LastError}}
		for k, v := range c.Metadata {
			fields = append(fields, [2]string{"metadata", k}, [2]string{"metadata", v})
		}
		if err := unstorable(fields); err != nil {
			return fmt.Errorf("cron entry %q: %w", c.ID, err)
		}
		var meta any
		if m := cronMetadata(c); m != nil {
			meta = []byte(*m)
		}
		rows = append(rows, []any{c.ID, c.Spec, c.Queue, c.Type, nonNil(c.Payload), c.ContentType, meta, c.Options, c.Paused,
			nanos(c.NextRun), nanos(c.LastRun), nanos(c.LastFire), c.LastTaskID, c.LastError})
	}
	_, err := s.tx.CopyFrom(ctx, pgx.Identifier{"conveyor_crons"}, []string{"id", "spec", "queue", "type", "payload",
		"content_type", "metadata", "options", "paused", "next_run", "last_run", "last_fire", "last_task_id", "last_error"},
		pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("COPY conveyor_crons: %w", err)
	}
	return nil
}
