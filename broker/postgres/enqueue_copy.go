package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
)

// newTaskColumns are the columns an enqueue's COPY fills; ready_seq is
// left to its default, the sequence, which numbers the rows in order (a
// task not yet ready gets a number it never uses: it is numbered again
// when it becomes ready).
var newTaskColumns = []string{"id", "queue", "type", "state", "priority", "retried", "max_retry", "payload",
	"content_type", "metadata", "options", "enqueued_at", "due_at", "expires_at", "deadline", "expire_at", "timeout",
	"retention", "retry_strategy", "retry_base", "retry_max", "unique_key", "unique_until", "group_key",
	"concurrency_key", "completed_at", "last_error", "spec_bytes", "release_state", "waiting", "dep_failed",
	"at_most_once"}

// copyRows inserts items[idx], whose ids the engine chose (so none is
// taken), with COPY.
func (t *txn) copyRows(ctx context.Context, items []newItem, idx []int, now int64) error {
	rows := make([][]any, len(idx))
	for j, i := range idx {
		it := &items[i]
		nt := it.nt
		var expireAt *int64
		if it.expire != 0 {
			expireAt = &it.expire
		}
		ret, rs, rb, rm := retryColumns(nt)
		var completed int64
		if c := it.endedAt(now); c != nil {
			completed = *c
		}
		rows[j] = []any{it.id, nt.Queue, nt.Type, int16(it.state), int16(nt.Priority), int32(0), nt.MaxRetry,
			nonNil(nt.Payload), nt.ContentType, it.metadata, nt.Options, now, it.due, nanos(nt.ExpiresAt), nanos(nt.Deadline),
			expireAt, int64(nt.Timeout), ret, rs, rb, rm, nullString(nt.UniqueKey), nanos(nt.UniqueUntil),
			nullString(nt.Group), nullString(nt.ConcurrencyKey), completed, it.lastError, int32(it.specBytes),
			int16(it.release), int32(len(it.deps.waitingOn)), it.deps.failed != "", nt.AtMostOnce}
	}
	if _, err := t.tx.CopyFrom(ctx, pgx.Identifier{"conveyor_tasks"}, newTaskColumns, pgx.CopyFromRows(rows)); err != nil {
		return fmt.Errorf("COPY conveyor_tasks: %w", err)
	}
	for _, i := range idx {
		items[i].stored = true
	}
	return nil
}

// retryColumns are a new task's retention and retry policy, NULL where
// it has none.
func retryColumns(nt *broker.NewTask) (retention *int64, strategy *int16, base, most *int64) {
	if nt.Retention != nil {
		retention = ptr(int64(*nt.Retention))
	}
	if p := nt.RetryPolicy; p != nil {
		strategy, base, most = ptr(int16(p.Strategy)), ptr(int64(p.Base)), ptr(int64(p.Max))
	}
	return retention, strategy, base, most
}

// endedAt is when a new task ended: now for one stored in a terminal
// state (a dependency failed before it was stored), else nil.
func (it *newItem) endedAt(now int64) *int64 {
	if it.state.Terminal() {
		return &now
	}
	return nil
}
