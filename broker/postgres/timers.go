package postgres

import (
	"context"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// promoteBatch bounds the tasks one PromoteDue moves; with more due, it
// asks to run again at once.
const promoteBatch = 10_000

// expiringSQL selects the tasks broker.Expired archives at now ($1): a
// waiting state (broker.State.Waiting) whose expire_at (ExpiryOf; NULL:
// none) is not after now. TestExpiringSQL holds it to the Go rule.
const expiringSQL = `state IN (1, 2, 4, 8, 9) AND expire_at <= $1`

// PromoteDue makes due SCHEDULED and RETRY tasks pending, archives the
// waiting tasks whose expiry passed, fires the groups whose time came and
// wakes the sessions of the queues whose rate bucket refilled; see
// broker.Broker. With several nodes, only the leader promotes: on the
// others it only wakes their sessions (each node keeps its own buckets).
func (e *Engine) PromoteDue(ctx context.Context, at time.Time) (time.Time, error) {
	now := nanos(at)
	e.mu.Lock()
	if e.hints.clockStart == 0 {
		e.hints.clockStart = now
	}
	e.mu.Unlock()
	if err := e.checkOpen(); err != nil {
		return time.Time{}, err
	}
	if leading, _ := e.Leading(); !leading {
		// The leader promotes; this node only wakes its own sessions
		// whose rate bucket refilled (the buckets are each node's).
		e.mu.Lock()
		defer e.mu.Unlock()
		e.hints.nextPromote = e.wakeRefilledLocked(now)
		return fromNanos(e.hints.nextPromote), nil
	}
	e.mu.Lock()
	floor, owner := e.promoteFloors.startRoundLocked(now)
	e.mu.Unlock()
	var r promoted
	err := e.inTx(ctx, func(t *txn) error {
		var err error
		r, err = t.promoteDue(ctx, now, floor)
		return err
	})
	e.mu.Lock()
	defer e.mu.Unlock()
	if owner {
		e.promoteFloors.endRoundLocked(r.left, err == nil && r.done)
	}
	if err != nil {
		return time.Time{}, err
	}
	next := r.next
	earliest(&next, e.wakeRefilledLocked(now))
	e.hints.nextPromote = next
	return fromNanos(next), nil
}

// promoted is what a round of the promoter did: next is when the next is
// due; done says it left nothing it could see due, and left holds the
// earliest time it left in each of its ranges (its floors' next values).
type promoted struct {
	next int64
	done bool
	left timeRanges
}

// promoteDue makes the due tasks at or above their range's floor pending
// and archives the expired ones, and fires the groups due.
func (t *txn) promoteDue(ctx context.Context, now int64, floor timeRanges) (promoted, error) {
	due, err := t.lockLive(ctx, `SELECT `+liveColumns+` FROM conveyor_tasks WHERE state IN (1, 4) AND due_at <= $1
		AND due_at >= $3 ORDER BY due_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`, now, promoteBatch, floor[rangeDue])
	if err != nil {
		return promoted{}, err
	}
	for _, lt := range due {
		if err := t.toPending(ctx, lt, now, pendingFields{}); err != nil {
			return promoted{}, err
		}
	}
	expired, err := t.lockLive(ctx, `SELECT `+liveColumns+` FROM conveyor_tasks WHERE `+expiringSQL+`
		AND expire_at >= $3 ORDER BY expire_at, id LIMIT $2 FOR UPDATE SKIP LOCKED`, now, promoteBatch, floor[rangeExpire])
	if err != nil {
		return promoted{}, err
	}
	for _, lt := range expired {
		if lt.state.Waiting() { // a task promoted above may have expired already
			if err := t.expire(ctx, lt, now); err != nil {
				return promoted{}, err
			}
		}
	}
	groups, err := t.fireDue(ctx, now)
	if err != nil {
		return promoted{}, err
	}
	if len(due) == promoteBatch || len(expired) == promoteBatch {
		return promoted{next: now}, nil // more to do: at once
	}
	// The earliest left of each range, rows skipped for their lock
	// included (this reads without locking).
	var nextDue, nextExpiry *int64
	if err := t.queryRow(ctx, `SELECT (SELECT min(due_at) FROM conveyor_tasks WHERE state IN (1, 4) AND due_at >= $1),
		(SELECT min(expire_at) FROM conveyor_tasks WHERE state IN (1, 2, 4, 8, 9) AND expire_at IS NOT NULL AND expire_at >= $2)`,
		floor[rangeDue], floor[rangeExpire]).Scan(&nextDue, &nextExpiry); err != nil {
		return promoted{}, err
	}
	r := promoted{done: true}
	for _, at := range []int64{deref(nextDue), deref(nextExpiry), groups} {
		earliest(&r.next, at)
	}
	r.left[rangeDue], r.left[rangeExpire] = orNow(nextDue, now), orNow(nextExpiry, now)
	return r, nil
}

// orNow is *at, or now when at is nil (a range with nothing left).
func orNow(at *int64, now int64) int64 {
	if at == nil {
		return now
	}
	return *at
}

// lockLive runs a query of liveColumns and returns its rows.
func (t *txn) lockLive(ctx context.Context, sql string, args ...any) ([]*liveTask, error) {
	rows, err := t.query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*liveTask
	for rows.Next() {
		lt, err := scanLive(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, lt)
	}
	return out, rows.Err()
}

// Purge deletes terminal tasks past their horizons; see broker.Broker.
// Its walks start at the purge floors (timefloors.go).
func (e *Engine) Purge(ctx context.Context, p broker.PurgeParams) (broker.PurgeNext, error) {
	var next broker.PurgeNext
	limit := max(p.Limit, 1)
	cut := timeRanges{rangeOwn: nanos(p.Now), rangeEnded + classCompleted: nanos(p.CompletedBefore),
		rangeEnded + classFailed: nanos(p.ArchivedBefore)}
	e.mu.Lock()
	floor, owner := e.purgeFloors.startRoundLocked(nanos(p.Now))
	e.mu.Unlock()
	err := e.inTx(ctx, func(t *txn) error {
		var err error
		next, err = t.purge(ctx, cut, floor, limit)
		return err
	})
	e.mu.Lock()
	if owner {
		e.purgeFloors.endRoundLocked(cut, err == nil && !next.More)
	}
	if err == nil {
		e.hints.purgeOwn = nanos(next.Own)
		e.hints.ended = [numClasses]int64{nanos(next.Completed), nanos(next.Archived)}
	}
	e.mu.Unlock()
	if err != nil {
		return broker.PurgeNext{}, err
	}
	return next, nil
}

// purge deletes up to limit terminal tasks whose time in their range lies
// between its floor and its cut, and reads each range's earliest time
// left from its floor. The DELETE checks the state again: a row it had to
// wait for is read as the transaction it waited for left it, and one that
// an operator ran again (RunTask) meanwhile is no longer terminal.
func (t *txn) purge(ctx context.Context, cut, floor timeRanges, limit int) (broker.PurgeNext, error) {
	rows, err := t.query(ctx, `WITH gone AS (
			SELECT id FROM conveyor_tasks WHERE purge_at IS NOT NULL AND purge_at <= $1 AND purge_at >= $5
			UNION ALL
			SELECT id FROM conveyor_tasks WHERE state = 5 AND purge_at IS NULL AND completed_at <= $2 AND completed_at >= $6
			UNION ALL
			SELECT id FROM conveyor_tasks WHERE state IN (6, 7) AND purge_at IS NULL AND completed_at <= $3 AND completed_at >= $7
			LIMIT $4)
		DELETE FROM conveyor_tasks t USING gone WHERE t.id = gone.id AND t.state IN (5, 6, 7)
		RETURNING t.id, t.queue, t.state`, cut[rangeOwn], cut[rangeEnded+classCompleted], cut[rangeEnded+classFailed], limit,
		floor[rangeOwn], floor[rangeEnded+classCompleted], floor[rangeEnded+classFailed])
	if err != nil {
		return broker.PurgeNext{}, err
	}
	var ids []string
	for rows.Next() {
		var id, queue string
		var state int16
		if err := rows.Scan(&id, &queue, &state); err != nil {
			rows.Close()
			return broker.PurgeNext{}, err
		}
		ids = append(ids, id)
		t.moved(queue, broker.State(state), 0, false, false)
	}
	if err := rows.Err(); err != nil {
		return broker.PurgeNext{}, err
	}
	if _, err := t.exec(ctx, `DELETE FROM conveyor_deps WHERE task_id = ANY($1)`, ids); err != nil {
		return broker.PurgeNext{}, err
	}
	var own, completed, failed *int64
	if err := t.queryRow(ctx, `SELECT
		(SELECT min(purge_at) FROM conveyor_tasks WHERE purge_at IS NOT NULL AND purge_at >= $1),
		(SELECT min(completed_at) FROM conveyor_tasks WHERE state = 5 AND purge_at IS NULL AND completed_at >= $2),
		(SELECT min(completed_at) FROM conveyor_tasks WHERE state IN (6, 7) AND purge_at IS NULL AND completed_at >= $3)`,
		floor[rangeOwn], floor[rangeEnded+classCompleted], floor[rangeEnded+classFailed]).Scan(&own, &completed, &failed); err != nil {
		return broker.PurgeNext{}, err
	}
	return broker.PurgeNext{Own: fromNanos(deref(own)), Completed: fromNanos(deref(completed)),
		Archived: fromNanos(deref(failed)), More: len(ids) == limit}, nil
}
