package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/conveyor-dev/conveyor/broker"
)

// completeBatch applies decisions about leased tasks in one transaction
// (CompleteBatch merges concurrent calls into it). The successes of plain
// tasks (no concurrency key, no unique key, no dependents, not canceled
// while running), most of a busy server's Results, are applied by one
// statement; every other decision, and a success the statement did not
// take, goes through Complete's own path, in order, in the same
// transaction.
func (e *Engine) completeBatch(ctx context.Context, ds []broker.Decision) ([]broker.Completion, error) {
	var out []broker.Completion
	err := e.inTx(ctx, func(t *txn) error {
		out = make([]broker.Completion, len(ds))
		done, err := t.completePlain(ctx, ds)
		if err != nil {
			return err
		}
		if slices.Contains(done, false) {
			t.planAsUsual() // for the per-decision path's statements
		}
		for i, d := range ds {
			if done[i] {
				out[i].State = broker.StateCompleted
				continue
			}
			to, err := t.decide(ctx, d, 0)
			switch {
			case err == nil:
				out[i].State = to
			case isLeaseLost(err):
				out[i].Err = err
			default:
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// completePlain completes, in one statement, the tasks whose decision is a
// success and that have nothing more to them than their row, and reports
// which decisions it applied. A decision whose lease is not current is
// left for the per-decision path, which answers ErrLeaseLost; so is the
// second decision of a batch for one lease.
func (t *txn) completePlain(ctx context.Context, ds []broker.Decision) ([]bool, error) {
	done := make([]bool, len(ds))
	var ids, sessions []string
	var tokens, nows []int64
	var results [][]byte
	var idx []int
	seen := map[string]bool{}
	for i, d := range ds {
		if d.Kind != broker.DecideComplete || !d.Verdict || seen[d.Lease.TaskID] {
			continue
		}
		seen[d.Lease.TaskID] = true
		idx = append(idx, i)
		ids, sessions = append(ids, d.Lease.TaskID), append(sessions, d.SessionID)
		tokens, nows = append(tokens, int64(d.Lease.Token)), append(nows, nanos(d.Now))
		results = append(results, nonNil(d.Result))
	}
	if len(idx) < 2 {
		return done, nil // one decision: the general path costs no more
	}
	t.planWithout(planSeqScan)
	t.planGenerically() // the per-decision path turns it back (completeBatch)
	rows, err := t.query(ctx, `WITH d AS (
			SELECT * FROM unnest($1::text[], $2::int8[], $3::text[], $4::int8[], $5::bytea[]) AS u(id, tok, sess, now, result))
		UPDATE conveyor_tasks t SET state = 5, completed_at = d.now,
			purge_at = CASE WHEN t.retention IS NOT NULL THEN conveyor_sat_add(d.now, t.retention) END,
			held = false, lease_session = NULL, lease_token = NULL, lease_expiry = NULL, lease_limit = NULL,
			start_authorized = false, push_invoked = false, result = d.result, progress_percent = 100
		FROM d
		WHERE t.id = d.id AND `+activeByID+` AND t.lease_token = d.tok AND t.lease_session = d.sess AND NOT t.canceled
			AND t.concurrency_key IS NULL AND t.unique_key IS NULL AND NOT t.has_dependents
		RETURNING t.id, t.queue, t.completed_at, t.purge_at`, ids, tokens, sessions, nows, results)
	if err != nil {
		return nil, err
	}
	at := make(map[string]int, len(idx))
	for j, i := range idx {
		at[ds[i].Lease.TaskID] = j
	}
	for rows.Next() {
		var id, queue string
		var completed int64
		var purgeAt *int64
		if err := rows.Scan(&id, &queue, &completed, &purgeAt); err != nil {
			rows.Close()
			return nil, err
		}
		j, ok := at[id]
		if !ok {
			rows.Close()
			return nil, fmt.Errorf("completed task %s is no decision's", id)
		}
		done[idx[j]] = true
		qd := t.q(queue)
		qd.processed++ // a verdict: only those are taken here
		t.moved(queue, broker.StateActive, broker.StateCompleted, false, false)
		t.endedTask(broker.StateCompleted, completed, purgeAt)
	}
	return done, rows.Err()
}
