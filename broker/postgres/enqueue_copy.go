package postgres

import (
	"context"
	"fmt"
	"strings"

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
// taken), with COPY, its rows written in the binary format by hand
// (copyRowsBuf), in newTaskColumns' order.
func (t *txn) copyRows(ctx context.Context, items []newItem, idx []int, now int64) error {
	buf := newCopyRowsBuf(len(idx) * (256 + len(items[idx[0]].nt.Payload)))
	for _, i := range idx {
		it := &items[i]
		nt := it.nt
		ret, rs, rb, rm := retryColumns(nt)
		var completed int64
		if c := it.endedAt(now); c != nil {
			completed = *c
		}
		var expireAt *int64
		if it.expire != 0 {
			expireAt = &it.expire
		}
		buf.row(len(newTaskColumns))
		buf.text(it.id)
		buf.text(nt.Queue)
		buf.text(nt.Type)
		buf.int2(int16(it.state))
		buf.int2(int16(nt.Priority))
		buf.int4(0) // retried
		buf.int4(nt.MaxRetry)
		buf.bytea(nonNil(nt.Payload))
		buf.text(nt.ContentType)
		buf.jsonb(it.metadata)
		buf.bytea(nt.Options)
		buf.int8(now)
		buf.int8(it.due)
		buf.int8(nanos(nt.ExpiresAt))
		buf.int8(nanos(nt.Deadline))
		buf.int8OrNull(expireAt)
		buf.int8(int64(nt.Timeout))
		buf.int8OrNull(ret)
		buf.int2OrNull(rs)
		buf.int8OrNull(rb)
		buf.int8OrNull(rm)
		buf.textOrNull(nt.UniqueKey)
		buf.int8(nanos(nt.UniqueUntil))
		buf.textOrNull(nt.Group)
		buf.textOrNull(nt.ConcurrencyKey)
		buf.int8(completed)
		buf.text(it.lastError)
		buf.int4(int32(it.specBytes))
		buf.int2(int16(it.release))
		buf.int4(int32(len(it.deps.waitingOn)))
		buf.boolean(it.deps.failed != "")
		buf.boolean(nt.AtMostOnce)
	}
	if err := t.tx.copyBinary(ctx, copyTasksSQL, buf.end()); err != nil {
		return fmt.Errorf("COPY conveyor_tasks: %w", err)
	}
	for _, i := range idx {
		items[i].stored = true
	}
	return nil
}

// copyTasksSQL is the COPY that copyRows feeds.
var copyTasksSQL = "COPY conveyor_tasks (" + strings.Join(newTaskColumns, ", ") + ") FROM STDIN (FORMAT binary)"

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
