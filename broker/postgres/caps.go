package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is a queue's caps (max_active, the rate limit) across the
// nodes sharing the database. Each node reserves them in memory first
// (lease.go's reserve): that spares the statements when they leave no
// room, and keeps one node exact. But a node learns of another's leases
// only later, so the database decides: a lease of a capped queue locks
// the queue's row FOR UPDATE first, so that the leases of that queue
// serialize across nodes, then counts the queue's ACTIVE tasks in a
// statement of its own (under READ COMMITTED it sees what the lease it
// waited for committed; the count stops at the cap) for
// broker.QueueConfig.ActiveRoom, and refills and spends the rate bucket
// kept in the row (broker.RateBucket, the same rule as the memory's).
// A lease takes at most what both allowed. When the database's bucket
// refused tokens the memory's had, the memory takes the database's
// (adoptBucketLocked), and waits for its refill as for its own. A queue
// with no cap pays none of this: no lock, no statement.

// capped is a capped queue whose row the transaction locked: its caps and
// rate bucket as stored, and its ACTIVE tasks, counted after the lock
// plus those the transaction leased since.
type capped struct {
	cfg    broker.QueueConfig
	active int64
	bucket broker.RateBucket[int64]
	// clockStart is the engine's (hints.clockStart): a bucket not started
	// starts empty then, as the memory's does.
	clockStart int64
	// dirty: the bucket changed, to be written back before the commit.
	dirty bool
}

// isCapped reports whether cfg has a cap the database decides.
func isCapped(cfg broker.QueueConfig) bool { return cfg.MaxActive > 0 || cfg.RatePerSecond > 0 }

// lockCaps locks the rows of the named queues not locked yet, in name
// order (two calls naming the same queues never wait for each other
// crosswise), and reads their caps, rate buckets and ACTIVE counts. The
// count is a second statement, sent in the same round trip: the server
// starts it once the lock is granted, so its snapshot sees what the
// transaction that held the lock committed.
func (t *txn) lockCaps(ctx context.Context, names []string) error {
	names = slices.DeleteFunc(slices.Clone(names), func(name string) bool { return t.caps[name] != nil })
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	names = slices.Compact(names)
	clockStart := t.e.clockStart()
	b := &pgx.Batch{}
	// A hold for a group gone is over (the memory drops it when the group
	// goes; here it is dropped at the next look).
	b.Queue(`SELECT name, max_active, rate_per_second, rate_burst, rate_tokens, rate_last,
			CASE WHEN rate_held <> 0 AND EXISTS (SELECT 1 FROM conveyor_groups g WHERE g.gid = rate_holder) THEN rate_held ELSE 0 END,
			rate_held_until, rate_holder
		FROM conveyor_queues WHERE name = ANY($1) ORDER BY name FOR UPDATE`, names)
	b.Queue(`SELECT q.name, (SELECT count(*) FROM (SELECT FROM conveyor_tasks a WHERE a.queue = q.name AND a.state = 3
			LIMIT q.max_active) a)
		FROM conveyor_queues q WHERE q.name = ANY($1) AND q.max_active > 0`, names)
	br := t.tx.SendBatch(ctx, b)
	if t.caps == nil {
		t.caps = map[string]*capped{}
	}
	err := scanRows(br, func(rows pgx.Rows) error {
		var name string
		c := &capped{clockStart: clockStart}
		if err := rows.Scan(&name, &c.cfg.MaxActive, &c.cfg.RatePerSecond, &c.cfg.RateBurst, &c.bucket.Tokens, &c.bucket.Last,
			&c.bucket.Held, &c.bucket.HeldUntil, &c.bucket.Holder); err != nil {
			return err
		}
		t.caps[name] = c
		return nil
	})
	if err == nil {
		err = scanRows(br, func(rows pgx.Rows) error {
			var name string
			var n int64
			if err := rows.Scan(&name, &n); err != nil {
				return err
			}
			if c := t.caps[name]; c != nil {
				c.active = n
			}
			return nil
		})
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// scanRows reads the next result of br, calling fn for each row.
func scanRows(br pgx.BatchResults, fn func(pgx.Rows) error) error {
	rows, err := br.Query()
	return forRows(rows, err, fn)
}

// refill brings c's bucket to at (Unix ns), starting it as the memory's.
func (c *capped) refill(at int64) {
	c.bucket.Start(c.clockStart, at)
	c.bucket.Refill(at, c.cfg)
	c.dirty = true
}

// alone is how many of n tasks leased alone c lets go at at, and whether
// its rate bucket held back some of those its room let go.
func (c *capped) alone(n int, at int64) (int, bool) {
	n = int(min(int64(n), c.cfg.ActiveRoom(c.active)))
	if c.cfg.RatePerSecond <= 0 || n == 0 {
		return n, false
	}
	c.refill(at)
	got, _ := c.bucket.Alone(int64(n), at, c.cfg)
	return int(got), got < int64(n)
}

// group decides as reserveGroup does whether fired group gid, with live
// members, may go at at: how many members its batch takes, whether they
// fit under the cap, whether the rate bucket lets them go (a group that
// must wait has the tokens it needs held for it).
func (c *capped) group(gid int64, live int, at int64) (n int, fits, goes bool) {
	n = c.cfg.BatchSize(live)
	if int64(n) > c.cfg.ActiveRoom(c.active) {
		return n, false, false
	}
	if c.cfg.RatePerSecond > 0 {
		c.refill(at)
		if ok, _ := c.bucket.ForGroup(gid, n, at, c.cfg); !ok {
			return n, true, false
		}
	}
	return n, true, true
}

// took records that n of c's tasks were leased: ACTIVE, a token each.
func (c *capped) took(n int) {
	c.active += int64(n)
	if c.cfg.RatePerSecond > 0 && n > 0 {
		c.bucket.Take(n, c.cfg)
		c.dirty = true
	}
}

// writeCaps writes back the rate buckets the transaction changed.
func (t *txn) writeCaps(ctx context.Context) error {
	for name, c := range t.caps {
		if !c.dirty {
			continue
		}
		b := c.bucket
		if _, err := t.exec(ctx, `UPDATE conveyor_queues SET rate_tokens = $2, rate_last = $3, rate_held = $4,
			rate_held_until = $5, rate_holder = $6 WHERE name = $1`, name, b.Tokens, b.Last, b.Held, b.HeldUntil, b.Holder); err != nil {
			return err
		}
		c.dirty = false
	}
	return nil
}

// clockStart is hints.clockStart.
func (e *Engine) clockStart() int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.hints.clockStart
}

// cappedPicks names the queues of picks that are capped and have tasks
// to lease at now, as the memory sees them: the rows a Lease locks.
func (e *Engine) cappedPicks(picks []broker.QueuePick, now time.Time) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, pick := range picks {
		q := e.hints.queues[pick.Queue]
		if q != nil && pick.N > 0 && isCapped(q.cfg) && !slices.Contains(out, q.name) && e.dispatchableLocked(q, now) > 0 {
			out = append(out, q.name)
		}
	}
	return out
}

// adoptBucketLocked makes the database's bucket db, which refused tokens
// q's own had, q's bucket, less the tokens the calls in progress reserved
// (db does not count them yet; they give back what they do not take),
// and has q's sessions woken when it refills: for group gid of n members
// (0: for a task alone).
func (e *Engine) adoptBucketLocked(q *queueHint, db broker.RateBucket[int64], gid int64, n int) {
	if q.cfg.RatePerSecond <= 0 {
		return
	}
	q.bucket.RateBucket = db
	q.bucket.Tokens -= float64(q.rateReserved)
	if gid != 0 {
		e.groupTokensLocked(q, gid, n, fromNanos(db.Last))
		return
	}
	if got, wake := q.bucket.Alone(1, db.Last, q.cfg); got == 0 {
		e.armRefillLocked(q, wake)
	}
}
