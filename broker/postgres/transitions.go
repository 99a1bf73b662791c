package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is how a task moves between states once stored: the row's
// change, and what leaving its state and entering the next mean for the
// rest (its key's admission, its group, its unique key, its dependents,
// the counts and the timers). Every move is made on a row the
// transaction locked (loadLive).

// liveTask is what a transition needs of a task's row.
type liveTask struct {
	id, queue, typ                string
	state                         broker.State
	priority                      int16
	held, canceled                bool
	ckey, unique, group           string
	gid                           int64
	retried, maxRetry             int32
	expireAt, expiresAt, deadline int64
	retention                     *int64
	due, enqueued                 int64
	session                       string
	token, leaseExpiry, leaseLim  int64
	release                       broker.State
	waiting                       int32
	depFailed, hasDependents      bool
	specBytes                     int32
	// atMostOnce marks a task that runs only under start authorization;
	// startAuthorized, an ACTIVE one whose current attempt's start was
	// authorized (broker.StartAuthorizer).
	atMostOnce, startAuthorized bool
	// pushInvoked marks an ACTIVE task whose current attempt was sent to a
	// push endpoint (broker.StartParams.Push).
	pushInvoked bool
}

const liveColumns = `id, queue, type, state, priority, held, canceled, coalesce(concurrency_key, ''),
	coalesce(unique_key, ''), coalesce(group_key, ''), coalesce(group_gid, 0), retried, max_retry,
	coalesce(expire_at, 0), expires_at, deadline, retention, due_at, enqueued_at, coalesce(lease_session, ''),
	coalesce(lease_token, 0), coalesce(lease_expiry, 0), coalesce(lease_limit, 0), release_state, waiting,
	dep_failed, has_dependents, spec_bytes, at_most_once, start_authorized, push_invoked`

func scanLive(row pgx.Row) (*liveTask, error) {
	var lt liveTask
	var state, release int16
	err := row.Scan(&lt.id, &lt.queue, &lt.typ, &state, &lt.priority, &lt.held, &lt.canceled, &lt.ckey,
		&lt.unique, &lt.group, &lt.gid, &lt.retried, &lt.maxRetry,
		&lt.expireAt, &lt.expiresAt, &lt.deadline, &lt.retention, &lt.due, &lt.enqueued, &lt.session,
		&lt.token, &lt.leaseExpiry, &lt.leaseLim, &release, &lt.waiting,
		&lt.depFailed, &lt.hasDependents, &lt.specBytes, &lt.atMostOnce, &lt.startAuthorized, &lt.pushInvoked)
	lt.state, lt.release = broker.State(state), broker.State(release)
	return &lt, err
}

// loadLive locks a task's row and reads it (nil: no such task).
func (t *txn) loadLive(ctx context.Context, id string) (*liveTask, error) {
	lt, err := scanLive(t.queryRow(ctx, `SELECT `+liveColumns+` FROM conveyor_tasks WHERE id = $1 FOR UPDATE`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return lt, err
}

// ready reports whether the task is in its queue's ready line.
func (lt *liveTask) ready() bool { return lt.state == broker.StatePending && !lt.held }

// expiredBy reports whether the task's expiry or deadline passed by now
// (broker.Expired).
func (lt *liveTask) expiredBy(now int64) bool {
	return broker.Expired(fromNanos(lt.expireAt), fromNanos(now))
}

// expiryMessage says which of the expiry and the deadline passed.
func (lt *liveTask) expiryMessage() string {
	_, deadlineFirst := broker.ExpiryOf(fromNanos(lt.expiresAt), fromNanos(lt.deadline))
	return broker.ExpiryMessage(deadlineFirst)
}

// leave applies what leaving its state means for the rest: a task that
// was ready or ACTIVE gives back its key's place; one that gathered in a
// group leaves it.
func (t *txn) leave(ctx context.Context, lt *liveTask) error {
	switch {
	case lt.ckey != "" && (lt.ready() || lt.state == broker.StateActive):
		return t.unadmit(ctx, lt.queue, lt.ckey, lt.state == broker.StateActive)
	case lt.state == broker.StateAggregating && lt.gid != 0:
		return t.leaveGroup(ctx, lt)
	}
	return nil
}

// pendingFields are what a move to PENDING changes besides the state.
type pendingFields struct {
	// retried, when set, counts one more failed attempt, with its error.
	failure *string
}

// toPending makes lt PENDING now (archived instead when its expiry
// passed): in its queue's ready line, or its key's held line.
func (t *txn) toPending(ctx context.Context, lt *liveTask, now int64, f pendingFields) error {
	if lt.expiredBy(now) {
		return t.expire(ctx, lt, now)
	}
	if err := t.leave(ctx, lt); err != nil {
		return err
	}
	retried, failure := lt.retried, ""
	if f.failure != nil {
		retried, failure = retried+1, *f.failure
	}
	if _, err := t.exec(ctx, `UPDATE conveyor_tasks SET state = 2, due_at = $2, ready_seq = nextval('conveyor_ready_seq'),
		held = false, lease_session = NULL, lease_token = NULL, lease_expiry = NULL, lease_limit = NULL, canceled = false,
		start_authorized = false, push_invoked = false, group_gid = NULL, retried = $3,
		last_error = CASE WHEN $4 THEN $5 ELSE last_error END,
		errors = CASE WHEN $4 THEN conveyor_push_error(errors, $3, $5, $2) ELSE errors END,
		progress_percent = CASE WHEN $4 THEN 0 ELSE progress_percent END,
		progress_message = CASE WHEN $4 THEN '' ELSE progress_message END
		WHERE id = $1`, lt.id, now, retried, f.failure != nil, failure); err != nil {
		return err
	}
	ready, err := t.admit(ctx, lt.queue, lt.ckey, lt.id)
	if err != nil {
		return err
	}
	t.moved(lt.queue, lt.state, broker.StatePending, lt.ready(), ready)
	t.promoteTimer(lt.expireAt)
	lt.state, lt.held, lt.retried = broker.StatePending, !ready, retried
	return nil
}

// toRetry records a failed attempt and makes lt RETRY until due, or
// PENDING at once when due is not after now (archived instead when its
// expiry passed).
func (t *txn) toRetry(ctx context.Context, lt *liveTask, due, now int64, errMsg string) error {
	if due <= now {
		return t.toPending(ctx, lt, now, pendingFields{failure: &errMsg})
	}
	if lt.expiredBy(now) {
		return t.expire(ctx, lt, now)
	}
	if err := t.leave(ctx, lt); err != nil {
		return err
	}
	if _, err := t.exec(ctx, `UPDATE conveyor_tasks SET state = 4, due_at = $2, retried = retried + 1, last_error = $3,
		errors = conveyor_push_error(errors, retried + 1, $3, $4), progress_percent = 0, progress_message = '',
		lease_session = NULL, lease_token = NULL, lease_expiry = NULL, lease_limit = NULL, canceled = false,
		start_authorized = false, push_invoked = false
		WHERE id = $1`, lt.id, due, errMsg, now); err != nil {
		return err
	}
	t.moved(lt.queue, lt.state, broker.StateRetry, lt.ready(), false)
	t.promoteTimer(due)
	t.promoteTimer(lt.expireAt)
	lt.state = broker.StateRetry
	return nil
}

// toScheduled makes lt SCHEDULED until due.
func (t *txn) toScheduled(ctx context.Context, lt *liveTask, due int64) error {
	if err := t.leave(ctx, lt); err != nil {
		return err
	}
	if _, err := t.exec(ctx, `UPDATE conveyor_tasks SET state = 1, due_at = $2 WHERE id = $1`, lt.id, due); err != nil {
		return err
	}
	t.moved(lt.queue, lt.state, broker.StateScheduled, lt.ready(), false)
	t.promoteTimer(due)
	t.promoteTimer(lt.expireAt)
	lt.state = broker.StateScheduled
	return nil
}

// toAggregating makes lt AGGREGATING as of now: it joins its group, whose
// delay and grace count from then.
func (t *txn) toAggregating(ctx context.Context, lt *liveTask, now int64) error {
	if lt.expiredBy(now) {
		return t.expire(ctx, lt, now)
	}
	if err := t.leave(ctx, lt); err != nil {
		return err
	}
	if _, err := t.exec(ctx, `UPDATE conveyor_tasks SET state = 8, due_at = $2 WHERE id = $1`, lt.id, now); err != nil {
		return err
	}
	t.moved(lt.queue, lt.state, broker.StateAggregating, lt.ready(), false)
	t.promoteTimer(lt.expireAt)
	lt.state = broker.StateAggregating
	return t.joinGroup(ctx, lt.id, lt.queue, lt.group, lt.typ, int(lt.specBytes), now)
}

// finishFields are what a move to a terminal state changes besides the
// state.
type finishFields struct {
	lastError *string
	// failure records the attempt's error in the history too.
	failure bool
	result  []byte
	// completed sets the progress to 100 and keeps result.
	completed bool
}

// finish makes lt terminal (to) at now: it leaves its key and group,
// releases its unique key, is timed for purging (by its own retention
// when COMPLETED with one, else by its class's horizon), and its
// dependents learn what its end means for them.
func (t *txn) finish(ctx context.Context, lt *liveTask, to broker.State, now int64, f finishFields) error {
	if err := t.leave(ctx, lt); err != nil {
		return err
	}
	if lt.unique != "" {
		if _, err := t.exec(ctx, `DELETE FROM conveyor_unique WHERE key = $1 AND task_id = $2`, lt.unique, lt.id); err != nil {
			return err
		}
	}
	var purgeAt *int64
	if to == broker.StateCompleted && lt.retention != nil {
		purgeAt = ptr(satAdd(now, time.Duration(*lt.retention)))
	}
	msg := ""
	if f.lastError != nil {
		msg = *f.lastError
	}
	if _, err := t.exec(ctx, `UPDATE conveyor_tasks SET state = $2, completed_at = $3, purge_at = $4,
		held = false, lease_session = NULL, lease_token = NULL, lease_expiry = NULL, lease_limit = NULL, canceled = false,
		start_authorized = false, push_invoked = false, group_gid = NULL,
		last_error = CASE WHEN $5 THEN $6 ELSE last_error END,
		errors = CASE WHEN $7 THEN conveyor_push_error(errors, retried + 1, $6, $3) ELSE errors END,
		result = CASE WHEN $8 THEN $9 ELSE result END,
		progress_percent = CASE WHEN $8 THEN 100 ELSE progress_percent END
		WHERE id = $1`, lt.id, int16(to), now, purgeAt, f.lastError != nil, msg, f.failure, f.completed, f.result); err != nil {
		return err
	}
	t.moved(lt.queue, lt.state, to, lt.ready(), false)
	t.endedTask(to, now, purgeAt)
	lt.state = to
	if !lt.hasDependents {
		return nil
	}
	return t.resolveDependents(ctx, lt.id, to, now)
}

// expire archives lt, whose expiry or deadline passed by now while it
// waited (or ran): it never runs, and no attempt is counted.
func (t *txn) expire(ctx context.Context, lt *liveTask, now int64) error {
	msg := lt.expiryMessage()
	t.q(lt.queue).expired++
	return t.finish(ctx, lt, broker.StateArchived, now, finishFields{lastError: &msg})
}
