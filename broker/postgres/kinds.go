package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
)

var _ broker.KindLister = (*Engine)(nil)

// WaitingKinds lists the kinds of queue's ready tasks; see
// broker.KindLister. It skips along conveyor_tasks_ready_type, whose keys
// begin (queue, type, at_most_once): one index descent per kind found
// (a recursive statement, each step the next kind after the last), never
// the tasks of a kind. Tasks a concurrency key holds back are not ready,
// and not listed.
func (e *Engine) WaitingKinds(ctx context.Context, queue string) ([]broker.Kind, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := e.pool.Query(ctx, waitingKindsSQL, queue, broker.MaxWaitingKinds)
	if err != nil {
		return nil, e.storageError(err)
	}
	kinds, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (broker.Kind, error) {
		var k broker.Kind
		err := row.Scan(&k.Type, &k.AtMostOnce)
		return k, err
	})
	if err != nil {
		return nil, e.storageError(err)
	}
	return kinds, nil
}

// waitingKindsSQL lists the first $2 kinds of queue $1's ready tasks, in
// (type, at_most_once) order: each step of the recursion is one descent
// of conveyor_tasks_ready_type to the kind after the last.
const waitingKindsSQL = `WITH RECURSIVE k AS (
		(SELECT type, at_most_once FROM conveyor_tasks
			WHERE queue = $1 AND ` + typedReady + `
			ORDER BY type, at_most_once LIMIT 1)
		UNION ALL
		SELECT n.type, n.at_most_once FROM k CROSS JOIN LATERAL (
			SELECT type, at_most_once FROM conveyor_tasks
			WHERE queue = $1 AND ` + typedReady + ` AND (type, at_most_once) > (k.type, k.at_most_once)
			ORDER BY type, at_most_once LIMIT 1) n)
	SELECT type, at_most_once FROM k LIMIT $2`
