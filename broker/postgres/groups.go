package postgres

import (
	"context"
	"sort"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is aggregation groups (protocol §5.11). An AGGREGATING task
// joins the open group of its (queue, group, type): a row of
// conveyor_groups that counts its members still there (live) and their
// bytes, and its first and last member's join times. A group fires when
// it reaches its policy's size (or broker.MaxGroupBytes), or when its
// time (GroupPolicy.FiresAt) comes, which PromoteDue applies; a fired
// group waits, closed, until a session of its type leases it as one
// batch. A member that leaves an open group takes its bytes with it, and
// the group's delay then counts from its oldest member still there
// (first_left marks a group to time again); a group left with no member
// is dropped. A member's join time is its due_at.

// groupPolicy is queue's effective group policy.
func (e *Engine) groupPolicy(queue string) broker.GroupPolicy {
	e.mu.Lock()
	defer e.mu.Unlock()
	var cfg broker.QueueConfig
	if q := e.hints.queues[queue]; q != nil {
		cfg = q.cfg
	}
	return cfg.Group.WithDefaults(e.cfg.GroupDefaults)
}

// joinGroup adds task id, AGGREGATING as of at, whose spec takes size
// bytes, to its open group, and fires the group if it is full.
func (t *txn) joinGroup(ctx context.Context, id, queue, name, typ string, size int, at int64) error {
	var gid, bytes, first, last int64
	var live int
	err := t.queryRow(ctx, `INSERT INTO conveyor_groups AS g (queue, name, type, first, last, live, bytes)
		VALUES ($1, $2, $3, $4, $4, 1, $5)
		ON CONFLICT (queue, name, type) WHERE NOT fired DO UPDATE SET live = g.live + 1, bytes = g.bytes + excluded.bytes,
			first = least(g.first, excluded.first), last = greatest(g.last, excluded.last)
		RETURNING gid, live, bytes, first, last`, queue, name, typ, at, size).Scan(&gid, &live, &bytes, &first, &last)
	if err != nil {
		return err
	}
	// ready_seq orders a group's members by when they joined.
	if _, err := t.exec(ctx, `UPDATE conveyor_tasks SET group_gid = $2, ready_seq = nextval('conveyor_ready_seq') WHERE id = $1`, id, gid); err != nil {
		return err
	}
	p := t.e.groupPolicy(queue)
	if p.Full(live, bytes) {
		return t.fireGroup(ctx, gid, queue, typ, live, at)
	}
	firesAt := nanos(p.FiresAt(fromNanos(first), fromNanos(last)))
	if _, err := t.exec(ctx, `UPDATE conveyor_groups SET fires_at = $2 WHERE gid = $1`, gid, firesAt); err != nil {
		return err
	}
	t.promoteTimer(firesAt)
	return nil
}

// fireGroup closes group gid: it waits for a session of its type.
func (t *txn) fireGroup(ctx context.Context, gid int64, queue, typ string, live int, now int64) error {
	if _, err := t.exec(ctx, `UPDATE conveyor_groups SET fired = true, fire_seq = nextval('conveyor_fire_seq'), fires_at = $2
		WHERE gid = $1`, gid, now); err != nil {
		return err
	}
	t.groupChanged(queue, gid, typ, live)
	return nil
}

// groupChanged records a fired group's live members (0: it is gone), for
// the hints.
func (t *txn) groupChanged(queue string, gid int64, typ string, live int) {
	d := t.q(queue)
	if d.groups == nil {
		d.groups = map[int64]firedGroup{}
	}
	d.groups[gid] = firedGroup{typ: typ, live: live}
}

// leaveGroup takes AGGREGATING task lt out of its group (it is canceled,
// deleted, archived, expired or run): an open group loses its bytes, and
// its time may move later if lt was its first; a group left with no
// member is dropped.
func (t *txn) leaveGroup(ctx context.Context, lt *liveTask) error {
	var live int
	var fired bool
	var first int64
	err := t.queryRow(ctx, `UPDATE conveyor_groups SET live = live - 1,
			bytes = CASE WHEN fired THEN bytes ELSE bytes - $2 END,
			first_left = first_left OR (NOT fired AND $3 <= first)
		WHERE gid = $1 RETURNING live, fired, first`, lt.gid, lt.specBytes, lt.due).Scan(&live, &fired, &first)
	if isNoRows(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if live <= 0 {
		if _, err := t.exec(ctx, `DELETE FROM conveyor_groups WHERE gid = $1`, lt.gid); err != nil {
			return err
		}
	}
	if fired {
		t.groupChanged(lt.queue, lt.gid, lt.typ, max(live, 0))
	}
	return nil
}

// fireDue fires the open groups whose time came by now (a group whose
// first member may have left is timed again from those still there, and
// fires only if its time still came) and returns the next group time (0:
// none).
func (t *txn) fireDue(ctx context.Context, now int64) (int64, error) {
	rows, err := t.query(ctx, `SELECT gid, queue, type, live, first, last, first_left FROM conveyor_groups
		WHERE NOT fired AND fires_at <= $1 ORDER BY fires_at, gid FOR UPDATE`, now)
	if err != nil {
		return 0, err
	}
	type due struct {
		gid         int64
		queue, typ  string
		live        int
		first, last int64
		firstLeft   bool
	}
	var dues []due
	for rows.Next() {
		var d due
		if err := rows.Scan(&d.gid, &d.queue, &d.typ, &d.live, &d.first, &d.last, &d.firstLeft); err != nil {
			rows.Close()
			return 0, err
		}
		dues = append(dues, d)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	for _, d := range dues {
		if d.firstLeft {
			first, err := t.regather(ctx, d.gid)
			if err != nil {
				return 0, err
			}
			p := t.e.groupPolicy(d.queue)
			if at := nanos(p.FiresAt(fromNanos(first), fromNanos(d.last))); at > now {
				if _, err := t.exec(ctx, `UPDATE conveyor_groups SET fires_at = $2 WHERE gid = $1`, d.gid, at); err != nil {
					return 0, err
				}
				continue
			}
		}
		if err := t.fireGroup(ctx, d.gid, d.queue, d.typ, d.live, now); err != nil {
			return 0, err
		}
	}
	var next *int64
	if err := t.queryRow(ctx, `SELECT min(fires_at) FROM conveyor_groups WHERE NOT fired`).Scan(&next); err != nil {
		return 0, err
	}
	return deref(next), nil
}

// regather finds an open group's first join among the members still
// there, after one that may have been its first left.
func (t *txn) regather(ctx context.Context, gid int64) (int64, error) {
	var first int64
	err := t.queryRow(ctx, `UPDATE conveyor_groups SET first = coalesce(
			(SELECT min(due_at) FROM conveyor_tasks WHERE group_gid = $1 AND state = 8), first), first_left = false
		WHERE gid = $1 RETURNING first`, gid).Scan(&first)
	return first, err
}

// policyChanged applies queue's group policy, just changed, to its groups
// still gathering: each gets the time the new policy gives it, and one
// that is Full under it is due at once, so the next PromoteDue
// fires it.
func (t *txn) policyChanged(ctx context.Context, queue string, p broker.GroupPolicy) error {
	rows, err := t.query(ctx, `SELECT gid, live, bytes, first, last FROM conveyor_groups WHERE queue = $1 AND NOT fired FOR UPDATE`, queue)
	if err != nil {
		return err
	}
	type open struct {
		gid         int64
		live        int
		bytes       int64
		first, last int64
	}
	var groups []open
	for rows.Next() {
		var g open
		if err := rows.Scan(&g.gid, &g.live, &g.bytes, &g.first, &g.last); err != nil {
			rows.Close()
			return err
		}
		groups = append(groups, g)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, g := range groups {
		at := nanos(p.FiresAt(fromNanos(g.first), fromNanos(g.last)))
		if p.Full(g.live, g.bytes) {
			at = min(at, g.first)
		}
		if _, err := t.exec(ctx, `UPDATE conveyor_groups SET fires_at = $2 WHERE gid = $1`, g.gid, at); err != nil {
			return err
		}
		t.promoteTimer(at)
	}
	return nil
}

// Groups lists the groups waiting; see broker.Broker.
func (e *Engine) Groups(ctx context.Context, queue string) ([]broker.GroupInfo, error) {
	var out []broker.GroupInfo
	err := e.inTx(ctx, func(t *txn) error {
		out = out[:0]
		rows, err := t.query(ctx, `SELECT g.gid, g.queue, g.name, g.type, g.live, g.first, g.last, g.fires_at, g.fired, g.first_left
			FROM conveyor_groups g WHERE ($1 = '' OR g.queue = $1) AND g.live > 0`, queue)
		if err != nil {
			return err
		}
		type row struct {
			gid       int64
			info      broker.GroupInfo
			firstLeft bool
		}
		var rs []row
		for rows.Next() {
			var r row
			var first, last, firesAt int64
			if err := rows.Scan(&r.gid, &r.info.Queue, &r.info.Group, &r.info.Type, &r.info.Size, &first, &last, &firesAt,
				&r.info.Fired, &r.firstLeft); err != nil {
				rows.Close()
				return err
			}
			r.info.First, r.info.Last, r.info.FiresAt = fromNanos(first), fromNanos(last), fromNanos(firesAt)
			rs = append(rs, r)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, r := range rs {
			if r.firstLeft && !r.info.Fired {
				first, err := t.regather(ctx, r.gid)
				if err != nil {
					return err
				}
				at := nanos(t.e.groupPolicy(r.info.Queue).FiresAt(fromNanos(first), r.info.Last))
				if _, err := t.exec(ctx, `UPDATE conveyor_groups SET fires_at = $2 WHERE gid = $1`, r.gid, at); err != nil {
					return err
				}
				r.info.First, r.info.FiresAt = fromNanos(first), fromNanos(at)
			}
			out = append(out, r.info)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Queue != b.Queue {
			return a.Queue < b.Queue
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Type != b.Type {
			return a.Type < b.Type
		}
		return a.Fired && !b.Fired // the fired instance first
	})
	return out, nil
}

// LeaseGroups leases fired groups as batches; see broker.Broker.
func (e *Engine) LeaseGroups(ctx context.Context, p broker.GroupLeaseParams) ([]broker.GroupLease, error) {
	now := nanos(p.Now)
	expiry := satAdd(now, p.TTL)
	e.lapses.RLock()
	defer e.lapses.RUnlock()
	var out []broker.GroupLease
	err := e.inTx(ctx, func(t *txn) error {
		out = out[:0]
		var err error
		out, err = t.leaseGroups(ctx, p, now, expiry)
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// leaseGroups leases up to p.N fired groups of p.Queue of p.Types, oldest
// first: each group's live members (as many as the queue's cap on ACTIVE
// tasks allows at all, the rest staying for a later batch), with members
// past their expiry or deadline archived instead; a group left with no
// member is dropped. A group that does not fit under the cap now is
// skipped; one the rate limit holds back stops the walk (the younger ones
// wait behind it).
func (t *txn) leaseGroups(ctx context.Context, p broker.GroupLeaseParams, now, expiry int64) ([]broker.GroupLease, error) {
	e := t.e
	if e.queuePaused(p.Queue) || p.N <= 0 || len(p.Types) == 0 {
		return nil, nil
	}
	if e.queueCapped(p.Queue) {
		if err := t.lockCaps(ctx, []string{p.Queue}); err != nil {
			return nil, err
		}
	}
	rows, err := t.query(ctx, `SELECT gid, name, type, live FROM conveyor_groups
		WHERE queue = $1 AND fired AND type = ANY($2) ORDER BY fire_seq FOR UPDATE SKIP LOCKED`, p.Queue, p.Types)
	if err != nil {
		return nil, err
	}
	type fired struct {
		gid       int64
		name, typ string
		live      int
	}
	var groups []fired
	for rows.Next() {
		var g fired
		if err := rows.Scan(&g.gid, &g.name, &g.typ, &g.live); err != nil {
			rows.Close()
			return nil, err
		}
		groups = append(groups, g)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []broker.GroupLease
	for _, g := range groups {
		if len(out) == p.N {
			break
		}
		live, err := t.expireMembers(ctx, g.gid, now)
		if err != nil {
			return nil, err
		}
		if live == 0 {
			if _, err := t.exec(ctx, `DELETE FROM conveyor_groups WHERE gid = $1`, g.gid); err != nil {
				return nil, err
			}
			t.groupChanged(p.Queue, g.gid, g.typ, 0)
			continue
		}
		n, fits, goes, memCapped := e.reserveGroup(p.Queue, g.gid, live, p.Now)
		if !fits {
			continue
		}
		if !goes {
			break
		}
		leases, fits, goes, err := t.leaseGroup(ctx, g.gid, n, live, memCapped, p, now, expiry)
		if err != nil {
			return nil, err
		}
		if !fits {
			continue
		}
		if !goes {
			break
		}
		left := live - len(leases)
		if _, err := t.exec(ctx, `UPDATE conveyor_groups SET live = $2 WHERE gid = $1`, g.gid, left); err != nil {
			return nil, err
		}
		if left <= 0 {
			if _, err := t.exec(ctx, `DELETE FROM conveyor_groups WHERE gid = $1`, g.gid); err != nil {
				return nil, err
			}
		}
		t.groupChanged(p.Queue, g.gid, g.typ, max(left, 0))
		if len(leases) > 0 {
			out = append(out, broker.GroupLease{Queue: p.Queue, Group: g.name, Type: g.typ, Leases: leases})
		}
	}
	return out, nil
}

// leaseGroup leases the batch of fired group gid, with live members, that
// reserveGroup let go with n of them, and gives back what it did not
// take. A queue capped in the database (its row locked by lockCaps) has
// the group decided there again, as reserveGroup did (caps.go): whether
// it fits under the cap, and whether the rate bucket lets it go; one
// capped in memory whose row was not locked (its caps came since) lets no
// group go in this call.
func (t *txn) leaseGroup(ctx context.Context, gid int64, n, live int, memCapped bool, p broker.GroupLeaseParams, now, expiry int64) (
	leases []broker.Lease, fits, goes bool, err error) {
	c := t.caps[p.Queue]
	take, fits, goes := n, true, !memCapped
	if c != nil {
		var batch int
		batch, fits, goes = c.group(gid, live, now)
		take = min(n, batch)
	}
	if !fits || !goes {
		var refused *refusal
		if fits && c != nil {
			refused = &refusal{bucket: c.bucket, gid: gid, n: take}
		}
		t.e.unreserve(t, p.Queue, n, 0, refused)
		return nil, fits, goes, nil
	}
	leases, err = t.leaseMembers(ctx, gid, take, p, now, expiry)
	if c != nil {
		c.took(len(leases))
	}
	t.e.unreserve(t, p.Queue, n, len(leases), nil)
	return leases, true, true, err
}

// expireMembers archives the members of fired group gid whose expiry or
// deadline passed by now (they must not run) and returns how many are
// left.
func (t *txn) expireMembers(ctx context.Context, gid, now int64) (int, error) {
	rows, err := t.query(ctx, `SELECT `+liveColumns+` FROM conveyor_tasks WHERE group_gid = $1 AND state = 8 ORDER BY ready_seq FOR UPDATE`, gid)
	if err != nil {
		return 0, err
	}
	var members []*liveTask
	for rows.Next() {
		lt, err := scanLive(rows)
		if err != nil {
			rows.Close()
			return 0, err
		}
		members = append(members, lt)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	live := 0
	for _, lt := range members {
		if !lt.expiredBy(now) {
			live++
			continue
		}
		lt.gid = 0 // the group's count is the caller's
		if err := t.expire(ctx, lt, now); err != nil {
			return 0, err
		}
	}
	return live, nil
}

// leaseMembers leases up to n live members of group gid, in member order,
// under one expiry.
func (t *txn) leaseMembers(ctx context.Context, gid int64, n int, p broker.GroupLeaseParams, now, expiry int64) ([]broker.Lease, error) {
	rows, err := t.query(ctx, `WITH picked AS (
			SELECT id FROM conveyor_tasks WHERE group_gid = $1 AND state = 8 ORDER BY ready_seq LIMIT $2 FOR UPDATE)
		UPDATE conveyor_tasks t SET state = 3, started_at = $3, lease_session = $4, lease_node = $7,
			lease_token = nextval('conveyor_lease_token'), canceled = false, group_gid = NULL,
			lease_limit = conveyor_lease_limit(t.deadline, t.timeout, $3, $6),
			lease_expiry = least($5, conveyor_lease_limit(t.deadline, t.timeout, $3, $6))
		FROM (SELECT f.id, g.fires_at FROM picked f, conveyor_groups g WHERE g.gid = $1) picked
		WHERE t.id = picked.id
		RETURNING `+taskColumns+`, t.lease_token, t.lease_expiry, picked.fires_at, t.ready_seq`,
		gid, n, now, p.SessionID, expiry, int64(p.LimitGrace), t.e.NodeID())
	if err != nil {
		return nil, err
	}
	type member struct {
		l          broker.Lease
		fired, seq int64
	}
	var ms []member
	for rows.Next() {
		var m member
		var token, leaseExpiry int64
		task, err := scanTaskWith(rows, &token, &leaseExpiry, &m.fired, &m.seq)
		if err != nil {
			rows.Close()
			return nil, err
		}
		m.l = broker.Lease{Task: task, Token: uint64(token), Expiry: fromNanos(leaseExpiry)}
		ms = append(ms, m)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].seq < ms[j].seq }) // member order
	out := make([]broker.Lease, len(ms))
	firedAt := make([]int64, len(ms))
	for i, m := range ms {
		out[i], firedAt[i] = m.l, m.fired
	}
	for i := range out {
		task := out[i].Task
		t.moved(task.Queue, broker.StateAggregating, broker.StateActive, false, false)
		// A member is ready from when its group fired: the time it spent
		// gathering is the aggregation's, asked for.
		task.NextProcessAt = fromNanos(max(nanos(task.NextProcessAt), firedAt[i]))
		task.StartedAt = fromNanos(now)
		t.leaseTimer(nanos(out[i].Expiry))
	}
	return out, nil
}
