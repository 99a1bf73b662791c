package postgres

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
)

// taskColumns are the columns scanTask reads, in its order; briefColumns
// are the same with what makes a task large left empty (ListParams.Brief).
const (
	taskColumns = `t.id, t.queue, t.type, t.state, t.priority, t.retried, t.max_retry, t.payload, t.content_type,
		t.metadata, t.options, t.enqueued_at, t.due_at, t.started_at, t.completed_at, t.expires_at, t.deadline,
		t.timeout, t.retention, t.retry_strategy, t.retry_base, t.retry_max, t.unique_key, t.group_key,
		t.concurrency_key, t.lease_session, t.lease_token, t.last_error, t.errors, t.result,
		t.progress_percent, t.progress_message, t.at_most_once`
	briefColumns = `t.id, t.queue, t.type, t.state, t.priority, t.retried, t.max_retry, ''::bytea, t.content_type,
		NULL::jsonb, t.options, t.enqueued_at, t.due_at, t.started_at, t.completed_at, t.expires_at, t.deadline,
		t.timeout, t.retention, t.retry_strategy, t.retry_base, t.retry_max, t.unique_key, t.group_key,
		t.concurrency_key, t.lease_session, t.lease_token, '', NULL::jsonb, NULL::bytea,
		t.progress_percent, '', t.at_most_once`
)

// scanTask reads one row of taskColumns.
func scanTask(row pgx.Row) (*broker.Task, error) {
	var t broker.Task
	var state, prio int16
	var metadata, errs []byte
	var enq, due, started, completed, expires, deadline, timeout int64
	var retention, rbase, rmax, leaseToken *int64
	var rstrategy *int16
	var unique, group, ckey, session *string
	err := row.Scan(&t.ID, &t.Queue, &t.Type, &state, &prio, &t.Retried, &t.MaxRetry, &t.Payload, &t.ContentType,
		&metadata, &t.Options, &enq, &due, &started, &completed, &expires, &deadline,
		&timeout, &retention, &rstrategy, &rbase, &rmax, &unique, &group,
		&ckey, &session, &leaseToken, &t.LastError, &errs, &t.Result,
		&t.ProgressPercent, &t.ProgressMessage, &t.AtMostOnce)
	if err != nil {
		return nil, err
	}
	t.State, t.Priority = broker.State(state), int32(prio)
	if len(metadata) > 0 {
		if err := json.Unmarshal(metadata, &t.Metadata); err != nil {
			return nil, err
		}
	}
	if len(t.Payload) == 0 {
		t.Payload = nil
	}
	if len(t.Options) == 0 {
		t.Options = nil
	}
	t.EnqueuedAt, t.NextProcessAt = fromNanos(enq), fromNanos(due)
	t.StartedAt, t.CompletedAt = fromNanos(started), fromNanos(completed)
	t.ExpiresAt, t.Deadline, t.Timeout = fromNanos(expires), fromNanos(deadline), time.Duration(timeout)
	if retention != nil {
		r := time.Duration(*retention)
		t.Retention = &r
	}
	if rstrategy != nil {
		t.RetryPolicy = &broker.RetryPolicy{Strategy: broker.RetryStrategy(*rstrategy), Base: time.Duration(deref(rbase)), Max: time.Duration(deref(rmax))}
	}
	t.UniqueKey, t.Group, t.ConcurrencyKey = derefString(unique), derefString(group), derefString(ckey)
	if t.State == broker.StateActive {
		t.SessionID, t.LeaseToken = derefString(session), uint64(deref(leaseToken))
	}
	if t.Errors, err = decodeErrors(errs); err != nil {
		return nil, err
	}
	return &t, nil
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func derefString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// attemptError is an entry of a task's error history as stored (see
// conveyor_push_error).
type attemptError struct {
	Attempt int32  `json:"a"`
	Message string `json:"m"`
	At      int64  `json:"t"`
}

func decodeErrors(b []byte) ([]broker.AttemptError, error) {
	if len(b) == 0 {
		return nil, nil
	}
	var stored []attemptError
	if err := json.Unmarshal(b, &stored); err != nil {
		return nil, err
	}
	out := make([]broker.AttemptError, len(stored))
	for i, s := range stored {
		out[i] = broker.AttemptError{Attempt: s.Attempt, Message: s.Message, At: fromNanos(s.At)}
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

// fillDeps sets the DependsOn of tasks (each dependency's state too, when
// withStates) from conveyor_deps.
func fillDeps(ctx context.Context, q querier, tasks []*broker.Task, withStates bool) error {
	if len(tasks) == 0 {
		return nil
	}
	byID := make(map[string]*broker.Task, len(tasks))
	ids := make([]string, len(tasks))
	for i, t := range tasks {
		byID[t.ID], ids[i] = t, t.ID
	}
	rows, err := q.Query(ctx, `SELECT d.task_id, d.dep_id, d.on_failure, coalesce(x.state, 0)
		FROM conveyor_deps d LEFT JOIN conveyor_tasks x ON $2 AND x.id = d.dep_id
		WHERE d.task_id = ANY($1) ORDER BY d.task_id, d.ord`, ids, withStates)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id, dep string
		var onFailure, state int16
		if err := rows.Scan(&id, &dep, &onFailure, &state); err != nil {
			return err
		}
		t := byID[id]
		t.DependsOn = append(t.DependsOn, broker.Dependency{TaskID: dep, OnFailure: broker.OnFailure(onFailure), State: broker.State(state)})
	}
	return rows.Err()
}
