package postgres

import "context"

// uniqueLapsedSQL is the negation of broker.UniqueHolds in SQL: the claim
// of row u of conveyor_unique has lapsed at now (a parameter, such as
// "$4") when its TTL passed or its task is terminal or gone.
// TestUniqueLapsedSQL holds it to the Go rule.
func uniqueLapsedSQL(now string) string {
	return `(u.until <> 0 AND u.until <= ` + now + `)
		OR NOT EXISTS (SELECT 1 FROM conveyor_tasks x WHERE x.id = u.task_id AND x.state NOT IN (5, 6, 7))`
}

// claimUnique claims unique key key for task id until until (0: until the
// task ends), unless another task holds it (broker.UniqueHolds). It
// returns the holder's id when the key is held ("" when the claim is
// id's).
//
// A free key is one INSERT. A key with a claim row is locked first, and
// whether its claim lapsed is read by a statement of its own, after the
// lock: a claim committed by a concurrent transaction (another node's
// enqueue of the same key) is then seen whole, its task included. A check
// within the statement that waited for the lock would read the tasks as
// they were before that wait, see the new holder's task missing, and take
// the key over: two tasks for one key.
func (t *txn) claimUnique(ctx context.Context, key, id string, until, now int64) (string, error) {
	for {
		rows, err := t.query(ctx, `INSERT INTO conveyor_unique (key, task_id, until) VALUES ($1, $2, $3)
			ON CONFLICT (key) DO NOTHING RETURNING task_id`, key, id, until)
		if err != nil {
			return "", err
		}
		claimed, err := collectStrings(rows)
		if err != nil || len(claimed) > 0 {
			return "", err
		}
		var holder string
		err = t.queryRow(ctx, `SELECT task_id FROM conveyor_unique WHERE key = $1 FOR UPDATE`, key).Scan(&holder)
		if isNoRows(err) {
			continue // the claim that conflicted was rolled back, or lapsed and was deleted
		}
		if err != nil {
			return "", err
		}
		if holder == id {
			_, err := t.exec(ctx, `UPDATE conveyor_unique SET until = $2 WHERE key = $1`, key, until)
			return "", err
		}
		var lapsed bool
		if err := t.queryRow(ctx, `SELECT `+uniqueLapsedSQL("$2")+` FROM conveyor_unique u WHERE key = $1`,
			key, now).Scan(&lapsed); err != nil {
			return "", err
		}
		if !lapsed {
			return holder, nil
		}
		_, err = t.exec(ctx, `UPDATE conveyor_unique SET task_id = $2, until = $3 WHERE key = $1`, key, id, until)
		return "", err
	}
}
