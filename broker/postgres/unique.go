package postgres

import "context"

// claimUnique claims unique key key for task id until until (0: until the
// task ends), unless another task holds it: one that is not terminal and
// whose claim has not lapsed by now. It returns the holder's id when the
// key is held ("" when the claim is id's).
func (t *txn) claimUnique(ctx context.Context, key, id string, until, now int64) (string, error) {
	rows, err := t.query(ctx, `INSERT INTO conveyor_unique AS u (key, task_id, until) VALUES ($1, $2, $3)
		ON CONFLICT (key) DO UPDATE SET task_id = excluded.task_id, until = excluded.until
		WHERE u.task_id = excluded.task_id OR (u.until <> 0 AND u.until <= $4)
			OR NOT EXISTS (SELECT 1 FROM conveyor_tasks x WHERE x.id = u.task_id AND x.state NOT IN (5, 6, 7))
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
