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
func (t *txn) claimUnique(ctx context.Context, key, id string, until, now int64) (string, error) {
	rows, err := t.query(ctx, `INSERT INTO conveyor_unique AS u (key, task_id, until) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET task_id = excluded.task_id, until = excluded.until
		WHERE u.task_id = excluded.task_id OR `+uniqueLapsedSQL("$4")+`
		RETURNING task_id`, key, id, until, now)
	if err != nil {
		return "", err
	}
	claimed, err := collectStrings(rows)
	if err != nil || len(claimed) > 0 {
		return "", err
	}
	var holder string
	err = t.queryRow(ctx, `SELECT task_id FROM conveyor_unique WHERE key = $1`, key).Scan(&holder)
	return holder, err
}
