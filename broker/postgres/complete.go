package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is the lifetime of a lease once granted: the decision that
// ends it (Complete, Release, the reaper's Reclaim), renewal and progress,
// all fenced by the lease's token and session.

// Complete applies a decision about a leased task; see broker.Broker.
func (e *Engine) Complete(ctx context.Context, d broker.Decision) (broker.State, error) {
	var to broker.State
	err := e.inTx(ctx, func(t *txn) error {
		var err error
		to, err = t.decide(ctx, d, 0)
		return err
	})
	return to, err
}

// currentLease locks the task a lease names and returns it, or
// ErrLeaseLost when the lease is not its current one.
func (t *txn) currentLease(ctx context.Context, session string, ref broker.LeaseRef) (*liveTask, error) {
	lt, err := t.loadLive(ctx, ref.TaskID)
	if err != nil {
		return nil, err
	}
	if lt == nil || lt.state != broker.StateActive || lt.session != session || uint64(lt.token) != ref.Token {
		return nil, fmt.Errorf("task %s: %w", ref.TaskID, broker.ErrLeaseLost)
	}
	return lt, nil
}

// decide applies d to the task its lease names and returns the state the
// task is in after. When lapsedBy is set, the lease must also have lapsed
// by then (a reclaim: a lease renewed since is left alone, ErrLeaseLost).
// An attempt whose start was authorized takes Decision.StartAuthorized,
// then a task an operator canceled while it ran takes Decision.Canceled.
func (t *txn) decide(ctx context.Context, d broker.Decision, lapsedBy int64) (broker.State, error) {
	lt, err := t.currentLease(ctx, d.SessionID, d.Lease)
	if err != nil {
		return 0, err
	}
	if lapsedBy != 0 && lt.leaseExpiry > lapsedBy {
		return 0, fmt.Errorf("task %s: renewed: %w", d.Lease.TaskID, broker.ErrLeaseLost)
	}
	if lt.startAuthorized && !outcomeUnknown(d) {
		d = d.StartAuthorized()
	}
	if lt.canceled {
		d = d.Canceled()
	}
	now := nanos(d.Now)
	if d.Verdict {
		qd := t.q(lt.queue)
		qd.processed++
		if d.Kind != broker.DecideComplete {
			qd.failed++
		}
	}
	switch d.Kind {
	case broker.DecideComplete:
		err = t.finish(ctx, lt, broker.StateCompleted, now, finishFields{completed: true, result: nonNil(d.Result)})
	case broker.DecideArchive:
		msg := noNUL(d.Error)
		err = t.finish(ctx, lt, broker.StateArchived, now, finishFields{lastError: &msg, failure: true})
	case broker.DecideCancel:
		err = t.finish(ctx, lt, broker.StateCanceled, now, finishFields{})
	case broker.DecideRetry:
		err = t.toRetry(ctx, lt, nanos(d.Due), now, noNUL(d.Error))
	default: // DecideRelease
		err = t.toPending(ctx, lt, now, pendingFields{})
	}
	return lt.state, err
}

// outcomeUnknown reports whether d already is what Decision.StartAuthorized
// makes of a decision with no verdict: applied again, it would say the
// lease lapsed where the caller said it was released.
func outcomeUnknown(d broker.Decision) bool {
	return d.Kind == broker.DecideArchive && !d.Verdict && strings.HasPrefix(d.Error, broker.OutcomeUnknownPrefix)
}

// Release hands leases back with no retry increment; see broker.Broker.
func (e *Engine) Release(ctx context.Context, p broker.ReleaseParams) error {
	return e.inTx(ctx, func(t *txn) error {
		for _, ref := range p.Leases {
			if _, err := t.decide(ctx, broker.Released(p.SessionID, ref, p.Now), 0); err != nil && !isLeaseLost(err) {
				return err
			}
		}
		return nil
	})
}

// Extend renews current leases; see broker.Broker.
func (e *Engine) Extend(ctx context.Context, p broker.ExtendParams) (int, error) {
	if len(p.Leases) == 0 {
		return 0, e.checkOpen()
	}
	expiry := satAdd(nanos(p.Now), p.TTL)
	ids := make([]string, len(p.Leases))
	tokens := make([]int64, len(p.Leases))
	for i, ref := range p.Leases {
		ids[i], tokens[i] = ref.TaskID, int64(ref.Token)
	}
	n := 0
	err := e.inTx(ctx, func(t *txn) error {
		t.planWithout(planSeqScan)
		rows, err := t.query(ctx, `UPDATE conveyor_tasks t
			SET lease_expiry = CASE WHEN t.lease_limit IS NOT NULL AND t.lease_limit < $3 THEN t.lease_limit ELSE $3 END
			FROM unnest($1::text[], $2::int8[]) AS u(id, tok)
			WHERE t.id = u.id AND t.lease_token = u.tok AND t.lease_session = $4 AND `+activeByID+`
			RETURNING t.lease_expiry`, ids, tokens, expiry, p.SessionID)
		if err != nil {
			return err
		}
		n = 0
		for rows.Next() {
			var at int64
			if err := rows.Scan(&at); err != nil {
				rows.Close()
				return err
			}
			t.leaseTimer(at)
			n++
		}
		return rows.Err()
	})
	return n, err
}

// Progress records a running task's progress; see broker.Broker.
func (e *Engine) Progress(ctx context.Context, p broker.ProgressParams) error {
	return e.inTx(ctx, func(t *txn) error {
		tag, err := t.exec(ctx, `UPDATE conveyor_tasks SET progress_percent = $4, progress_message = $5
			WHERE id = $1 AND lease_token = $2 AND lease_session = $3 AND state = 3`,
			p.Lease.TaskID, int64(p.Lease.Token), p.SessionID, p.Percent, noNUL(p.Message))
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("task %s: %w", p.Lease.TaskID, broker.ErrLeaseLost)
		}
		return nil
	})
}

// LapsedLeases lists the leases of this node's sessions whose expiry
// passed; see broker.Broker. Each node reaps its own: the leader releases
// those of nodes that died (cluster.go).
func (e *Engine) LapsedLeases(ctx context.Context, at time.Time) ([]broker.LapsedLease, time.Time, error) {
	if err := e.checkOpen(); err != nil {
		return nil, time.Time{}, err
	}
	now := nanos(at)
	rows, err := e.pool.Query(ctx, `SELECT id, lease_session, lease_token, lease_expiry, coalesce(lease_limit, 0), retried, max_retry,
			start_authorized
		FROM conveyor_tasks WHERE state = 3 AND lease_expiry <= $1 AND lease_node = $2 ORDER BY lease_expiry, id`, now, e.NodeID())
	if err != nil {
		return nil, time.Time{}, e.storageError(err)
	}
	var out []broker.LapsedLease
	for rows.Next() {
		var l broker.LapsedLease
		var token, expiry, limit int64
		if err := rows.Scan(&l.Lease.TaskID, &l.SessionID, &token, &expiry, &limit, &l.Retried, &l.MaxRetry, &l.StartAuthorized); err != nil {
			rows.Close()
			return nil, time.Time{}, e.storageError(err)
		}
		l.Lease.Token, l.Expiry, l.Limited = uint64(token), fromNanos(expiry), limit != 0 && expiry == limit
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, time.Time{}, e.storageError(err)
	}
	var next *int64
	if len(out) == 0 {
		if err := e.pool.QueryRow(ctx, `SELECT min(lease_expiry) FROM conveyor_tasks WHERE state = 3 AND lease_node = $1`, e.NodeID()).Scan(&next); err != nil {
			return nil, time.Time{}, e.storageError(err)
		}
	}
	e.mu.Lock()
	e.hints.nextLease = deref(next)
	if len(out) > 0 {
		e.hints.nextLease = nanos(out[0].Expiry)
	}
	e.mu.Unlock()
	return out, fromNanos(deref(next)), nil
}

// Reclaim applies the reaper's decisions about lapsed leases; see
// broker.Broker. It holds the engine's lapses lock, which every Lease
// shares, until it has told each session of its lapse: no task it takes
// back can go out again before.
func (e *Engine) Reclaim(ctx context.Context, decisions []broker.Decision) error {
	e.lapses.Lock()
	defer e.lapses.Unlock()
	return e.inTx(ctx, func(t *txn) error {
		for _, d := range decisions {
			lt, err := t.currentLease(ctx, d.SessionID, d.Lease)
			if isLeaseLost(err) || err == nil && lt.leaseExpiry > nanos(d.Now) {
				continue // answered, released or renewed since it was listed
			}
			if err != nil {
				return err
			}
			lapsed := broker.LapsedLease{SessionID: d.SessionID, Lease: d.Lease, Expiry: fromNanos(lt.leaseExpiry),
				Limited: lt.leaseLim != 0 && lt.leaseExpiry == lt.leaseLim, StartAuthorized: lt.startAuthorized}
			if lapsed.To, err = t.decide(ctx, d, nanos(d.Now)); err != nil {
				return err
			}
			t.lapsed = append(t.lapsed, lapsed)
		}
		return nil
	})
}
