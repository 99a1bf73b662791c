package postgres

import (
	"context"
	"fmt"
)

// sealSteps build, once a copy's tasks are loaded, the rows the engine
// derives from its tasks as they move, so that the engine opened on the
// store afterwards goes on from them as it would have on the source:
//   - a row for each queue that only its tasks name;
//   - the groups: the members of a group the source had fired (the task's
//     GroupFiredAt) form it again, fired as then, in that order; the other
//     AGGREGATING members of a (queue, group, type), in the order they
//     joined, fill groups of their queue's own max size, fired (as a join
//     fires a group that reaches it; the embedded engine, which keeps no
//     fired groups, fires them again so on open), and the rest form its
//     open group, marked to be timed again (first_left) and due at once,
//     so that the engine's first PromoteDue times it with the group policy
//     it runs with and fires it if its time has come (a queue with no max
//     size of its own fires by time only: the server's default size is
//     not the copy's to know);
//   - the unique claims: of the incomplete tasks naming a key, the claim
//     that runs out last (a claim without an end first), as the embedded
//     engine rebuilds them;
//   - the keys' admissions: of a key's PENDING tasks, as many as its
//     queue's concurrency limit leaves beside its ACTIVE ones are
//     admitted, in their line's order; the others are held; each key
//     counts its admitted and ACTIVE tasks;
//   - the mark of the tasks that have dependents;
//   - the sequences, past every number the copy used.
var sealSteps = []struct{ what, sql string }{
	{"queue rows", `INSERT INTO conveyor_queues (name) SELECT DISTINCT queue FROM conveyor_tasks ON CONFLICT DO NOTHING`},
	{"fired groups", `INSERT INTO conveyor_groups (queue, name, type, first, last, live, bytes, fires_at, fired, fire_seq)
		SELECT t.queue, t.group_key, t.type, min(t.due_at), max(t.due_at), count(*), sum(t.spec_bytes), f.fired_at, true,
			row_number() OVER (ORDER BY f.fired_at, t.queue, t.group_key, t.type)
		FROM conveyor_tasks t JOIN conveyor_copy_fired f ON f.id = t.id
		WHERE t.state = 8 GROUP BY t.queue, t.group_key, t.type, f.fired_at`},
	{"fired groups' members", `UPDATE conveyor_tasks t SET group_gid = g.gid
		FROM conveyor_copy_fired f, conveyor_groups g
		WHERE f.id = t.id AND t.state = 8 AND g.fired AND g.queue = t.queue AND g.name = t.group_key AND g.type = t.type
			AND g.fires_at = f.fired_at`},
	{"open groups' members", `CREATE TEMP TABLE conveyor_copy_members ON COMMIT DROP AS
		SELECT t.id, t.queue, t.group_key AS name, t.type, t.due_at, t.spec_bytes,
			coalesce((row_number() OVER w - 1) / nullif(q.group_max_size, 0), 0) AS chunk,
			q.group_max_size > 0 AND coalesce((row_number() OVER w - 1) / nullif(q.group_max_size, 0) + 1, 0) * q.group_max_size
				<= count(*) OVER (PARTITION BY t.queue, t.group_key, t.type) AS filled
		FROM conveyor_tasks t JOIN conveyor_queues q ON q.name = t.queue
		WHERE t.state = 8 AND t.group_gid IS NULL
		WINDOW w AS (PARTITION BY t.queue, t.group_key, t.type ORDER BY t.due_at, t.ready_seq, t.id)`},
	{"open members' groups", `CREATE TEMP TABLE conveyor_copy_groups ON COMMIT DROP AS
		SELECT nextval(pg_get_serial_sequence('conveyor_groups', 'gid')) AS gid, g.*
		FROM (SELECT queue, name, type, chunk, filled, min(due_at) AS first, max(due_at) AS last, count(*) AS live,
				sum(spec_bytes) AS bytes
			FROM conveyor_copy_members GROUP BY queue, name, type, chunk, filled) g`},
	{"open members' group rows", `INSERT INTO conveyor_groups (gid, queue, name, type, first, last, live, bytes, fires_at, fired,
			fire_seq, first_left)
		SELECT gid, queue, name, type, first, last, live, bytes, CASE WHEN filled THEN last ELSE first END, filled,
			CASE WHEN filled THEN coalesce((SELECT max(fire_seq) FROM conveyor_groups), 0)
				+ row_number() OVER (PARTITION BY filled ORDER BY last, gid) END,
			NOT filled
		FROM conveyor_copy_groups`},
	{"open groups' members", `UPDATE conveyor_tasks t SET group_gid = g.gid
		FROM conveyor_copy_members m JOIN conveyor_copy_groups g USING (queue, name, type, chunk)
		WHERE t.id = m.id`},
	{"unique claims", `INSERT INTO conveyor_unique (key, task_id, until)
		SELECT DISTINCT ON (unique_key) unique_key, id, unique_until FROM conveyor_tasks
		WHERE unique_key IS NOT NULL AND state NOT IN (5, 6, 7)
		ORDER BY unique_key, unique_until = 0 DESC, unique_until DESC, enqueued_at DESC, id DESC`},
	{"held tasks", `WITH keyed AS (
			SELECT t.id, t.state, greatest(coalesce(q.concurrency_limit, 0), 1) AS lim,
				row_number() OVER (PARTITION BY t.queue, t.concurrency_key, t.state ORDER BY t.ready_seq, t.id) AS n,
				count(*) FILTER (WHERE t.state = 3) OVER (PARTITION BY t.queue, t.concurrency_key) AS active
			FROM conveyor_tasks t LEFT JOIN conveyor_queues q ON q.name = t.queue
			WHERE t.concurrency_key IS NOT NULL AND t.state IN (2, 3))
		UPDATE conveyor_tasks t SET held = true FROM keyed k
		WHERE t.id = k.id AND k.state = 2 AND k.n > k.lim - k.active`},
	{"concurrency keys", `INSERT INTO conveyor_ckeys (queue, key, admitted, active)
		SELECT queue, concurrency_key, count(*) FILTER (WHERE state = 3 OR NOT held), count(*) FILTER (WHERE state = 3)
		FROM conveyor_tasks WHERE concurrency_key IS NOT NULL AND state IN (2, 3) GROUP BY queue, concurrency_key`},
	{"dependents", `UPDATE conveyor_tasks SET has_dependents = true
		WHERE id IN (SELECT dep_id FROM conveyor_deps) AND NOT has_dependents`},
	{"sequences", `SELECT setval('conveyor_ready_seq', greatest((SELECT max(ready_seq) FROM conveyor_tasks), 1)),
		setval('conveyor_fire_seq', greatest((SELECT max(fire_seq) FROM conveyor_groups), 1))`},
}

// Seal builds the derived rows; see sealSteps.
func (s *CopyStore) Seal(ctx context.Context) error {
	if !s.target {
		return errNotTarget
	}
	if err := s.fireTable(ctx); err != nil {
		return err
	}
	for _, step := range sealSteps {
		if _, err := s.tx.Exec(ctx, step.sql); err != nil {
			return fmt.Errorf("build the %s: %w", step.what, err)
		}
	}
	return nil
}
