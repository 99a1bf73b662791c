package postgres

import (
	"context"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
)

// A lease's pick is one statement: the first N rows of the queue's ready
// line that the lease's route takes (route.go), locked with SKIP LOCKED
// (so concurrent transactions take different tasks), made ACTIVE. The
// rows are updated by the physical address the lock returned (they are
// locked: it cannot change before the update), which spares a
// primary-key lookup per task. The picks of the node's concurrent Lease
// calls that share a walk go in one statement, whose rows are dealt out
// to them (lease_merge.go).
// The queue's caps (max_active, the rate limit) are reserved in memory
// before, so concurrent calls of this node never pass them together, and
// for a capped queue decided again in the database (caps.go), whose
// row the transaction locks first, so that no two nodes pass them
// together either.

// leasePick leases what g's takers ask for of its queue, reserved in
// memory, and gives back what they did not take. A queue capped in the
// database (its row locked by lockCaps) gets no more than its caps there
// allow; one capped in memory whose row was not locked (it had nothing to
// lease then) gets none in this call. It marks g short when the lease
// came out short of what the caps allowed, for recheckLater (a look is
// owed only for the rows SKIP LOCKED passed: the database's caps wake the
// sessions when they have room again, through the refill's wake and the
// commits that end ACTIVE tasks).
//
// A lease whose route passes tasks over (not open) may come back short
// because what the queue holds is not for it: it then marks the queue
// passed over (passedover.go) and is owed a look only when a task it
// takes is still ready, passed over for a lock (moreReady); a look for
// every short routed lease would wake the queue's sessions every
// recheckAfter while tasks nobody here takes wait.
func (t *txn) leasePick(ctx context.Context, g *pickGroup, node string) error {
	c := t.caps[g.queue]
	rateCut, memShort, total := false, false, 0
	for _, tk := range g.takers {
		var memCapped bool
		tk.reserved, tk.at, memCapped = t.e.reserve(t, g.queue, tk.want, tk.p.Now)
		tk.allowed = tk.reserved
		switch {
		case tk.reserved == 0:
		case c != nil: // g.alone: its only taker
			var cut bool
			tk.allowed, cut = c.alone(tk.reserved, nanos(tk.at))
			rateCut = rateCut || cut
		case memCapped:
			tk.allowed, memShort = 0, true
		}
		total += tk.allowed
	}
	var err error
	if total > 0 && g.walk.kind != walkNone {
		g.short, err = t.leaseWalk(ctx, g, leaseArgs{slots: dealSlots(g.takers), grace: g.grace, node: node, push: g.push})
	}
	g.short = g.short || memShort
	var refused *refusal
	if c != nil {
		took := 0
		for _, tk := range g.takers {
			took += len(tk.got)
		}
		c.took(took)
		if rateCut {
			refused = &refusal{bucket: c.bucket}
		}
	}
	for _, tk := range g.takers {
		t.e.unreserve(t, g.queue, tk.reserved, len(tk.got), refused)
	}
	return err
}

// dealSlots deals the rows a walk may take out to takers in turn, up to
// what each is allowed, so that a walk that comes out short shares what
// it took among them.
func dealSlots(takers []*taker) leaseSlots {
	var s leaseSlots
	left := make([]int, len(takers))
	n := 0
	for i, tk := range takers {
		left[i] = tk.allowed
		n += tk.allowed
	}
	for n > 0 {
		for i, tk := range takers {
			if left[i] > 0 {
				s.add(i, tk.p.SessionID, nanos(tk.at), satAdd(nanos(tk.p.Now), tk.p.TTL))
				left[i]--
				n--
			}
		}
	}
	return s
}

// leaseWalk leases what g's takers are allowed of g's queue, each its
// share of the rows the walk takes (l.slots), and reports whether the
// queue is owed a look (recheckLater) for the rows it passed over locked.
func (t *txn) leaseWalk(ctx context.Context, g *pickGroup, l leaseArgs) (bool, error) {
	queue, w, n := g.queue, g.walk, len(l.slots.taker)
	var since uint64
	if w.kind != walkOpen {
		since = t.e.routingStarted(queue)
	}
	got, err := t.leaseReady(ctx, queue, n, w, l)
	took := 0
	if err == nil {
		byTaker := make([][]leased, len(g.takers))
		for _, x := range got {
			byTaker[x.taker] = append(byTaker[x.taker], x)
		}
		for i, tk := range g.takers {
			if tk.got, err = t.settleLeased(ctx, queue, byTaker[i], nanos(tk.at)); err != nil {
				break
			}
			took += len(tk.got)
		}
	}
	short := err == nil && took < n
	if w.kind == walkOpen {
		return short, err
	}
	t.e.routingEnded(queue, short, since)
	if short {
		short, err = t.moreReady(ctx, queue, w)
	}
	return short, err
}

// recheckAfter is how long after a short lease the engine looks at the
// queue again.
const recheckAfter = 20 * time.Millisecond

// recheckLater signals TasksReady for queue in a moment if it still has
// dispatchable tasks then. A lease takes fewer tasks than the hints
// counted when some of the rows were locked by another transaction for a
// moment (SKIP LOCKED passes them: a stale Result's check, a release
// committing). The session that asked may then go idle, and with the
// queue's count never back at 0, no later commit would signal it: without
// this look, a queue could hold ready tasks that every session sleeps
// through. One look per queue is armed at a time.
func (e *Engine) recheckLater(queue string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.hints.queues[queue]
	if q == nil || q.recheck != nil || e.closed {
		return
	}
	q.recheck = time.AfterFunc(recheckAfter, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		q.recheck = nil
		if !e.closed && e.dispatchableLocked(q, e.cfg.Now()) > 0 {
			e.note.TasksReady(q.name)
		}
	})
}

// stopRechecksLocked stops the looks recheckLater armed (on Close).
func (e *Engine) stopRechecksLocked() {
	for _, q := range e.hints.queues {
		if q.recheck != nil {
			q.recheck.Stop()
			q.recheck = nil
		}
	}
}

// leaseArgs are what every lease statement of one walk shares.
type leaseArgs struct {
	// slots are the rows the walk may take, each dealt to its taker.
	slots leaseSlots
	grace time.Duration
	node  string
	push  bool // broker.LeaseParams.Push
	// byKind: the walk records what it took per kind (a typed walk's
	// floors, scanfloor.go).
	byKind bool
}

// from is l for a statement that takes the rows from slot i on, after
// the walk's earlier statements took i.
func (l leaseArgs) from(i int) leaseArgs {
	s := &l.slots
	l.slots = leaseSlots{taker: s.taker[i:], sessions: s.sessions[i:], nows: s.nows[i:], expiries: s.expiries[i:]}
	return l
}

// leaseSlots are the rows a walk may take, dealt out to its takers: the
// statement gives its i-th row to the i-th slot's taker (its index in the
// pickGroup), with that taker's session, time and lease expiry.
type leaseSlots struct {
	taker          []int
	sessions       []string
	nows, expiries []int64
}

func (s *leaseSlots) add(taker int, session string, now, expiry int64) {
	s.taker = append(s.taker, taker)
	s.sessions = append(s.sessions, session)
	s.nows = append(s.nows, now)
	s.expiries = append(s.expiries, expiry)
}

// leased is one row a lease statement took from a ready line.
type leased struct {
	l        broker.Lease
	seq      int64
	expireAt int64
	started  int64
	taker    int // its slot's taker
}

// leaseQueue leases up to n ready tasks of queue, highest priority first
// and FIFO within a priority, each lease capped at its task's
// broker.LeaseLimit. The open walk reads the ready line one priority at a
// time, from that priority's scan floor (scanfloor.go): with the priority
// fixed, the floor bounds where the index scan starts.
//
// pick is the statement that picks the rows (route.go: the open walk's,
// by priority from the floors, or another route's), with its arguments
// from $8 on.
func (t *txn) leaseQueue(ctx context.Context, queue string, n int, pick string, pickArgs []any, l leaseArgs) ([]leased, readyWalk, error) {
	var walk readyWalk
	t.planWithout(planSort)
	t.planGenerically()
	defer t.planAsUsual()
	s := l.slots
	args := append([]any{queue, n, s.nows[:n], s.sessions[:n], s.expiries[:n], int64(l.grace), l.node}, pickArgs...)
	args = append(args, l.push)
	rows, err := t.query(ctx, leaseSQL(pick, len(args)), args...)
	if err != nil {
		return nil, walk, err
	}
	var got []leased
	for rows.Next() {
		var x leased
		var token, leaseExpiry, slot int64
		task, err := scanTaskWith(rows, &token, &leaseExpiry, &x.seq, &x.expireAt, &x.started, &slot)
		if err != nil {
			rows.Close()
			return nil, walk, err
		}
		x.l = broker.Lease{Task: task, Token: uint64(token), Expiry: fromNanos(leaseExpiry)}
		x.taker = s.taker[slot-1]
		got = append(got, x)
		if l.byKind {
			walk.tookKind(broker.Kind{Type: task.Type, AtMostOnce: task.AtMostOnce}, task.Priority, x.seq)
		} else {
			walk.took(task.Priority, x.seq)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, walk, err
	}
	t.e.noteSeqSeen(slices.Max(walk.maxSeq[:]))
	return got, walk, nil
}

// leaseSQL is the statement that leases the rows pick picks: $1 the
// queue, $2 how many; $3 the times, $4 the sessions and $5 the expiries,
// one per slot, the statement's i-th row (in the order pick gives them)
// going to the i-th; $6 the grace, $7 the node; the pick's own from $8
// on; and the last, $pushArg, marks the leases a push endpoint's. As an
// argument rather than in the text, it leaves a push endpoint's leases
// the statement of the zero route's, which WarmLeases readies. The slots
// are joined to the rows as a relation, each array read once:
// subscripting the arrays for each row cost a quarter of a millisecond a
// lease of 32 tasks.
func leaseSQL(pick string, pushArg int) string {
	return `WITH picked AS (SELECT p.tid, p.started_at, row_number() OVER () AS slot FROM (` + pick + `) p),
		dealt AS (SELECT p.tid, p.started_at, p.slot, d.now, d.session, d.expiry FROM picked p
			JOIN unnest($3::int8[], $4::text[], $5::int8[]) WITH ORDINALITY AS d(now, session, expiry, slot) ON d.slot = p.slot)
		UPDATE conveyor_tasks t SET state = 3, started_at = greatest(s.now, t.due_at), lease_session = s.session,
			lease_node = $7, lease_token = nextval('conveyor_lease_token'), canceled = false, start_authorized = false,
			push_invoked = $` + strconv.Itoa(pushArg) + `::bool,
			lease_limit = conveyor_lease_limit(t.deadline, t.timeout, s.now, $6),
			lease_expiry = least(s.expiry, conveyor_lease_limit(t.deadline, t.timeout, s.now, $6))
		FROM dealt s WHERE t.ctid = s.tid
		RETURNING ` + taskColumns + `, t.lease_token, t.lease_expiry, t.ready_seq, coalesce(t.expire_at, 0), s.started_at, s.slot`
}

// settleLeased turns the rows taken from queue's ready line into leases,
// highest priority first and FIFO within a priority. A task whose expiry
// or deadline passed is archived instead; a keyed one whose key is at its
// limit (lowered since it was admitted) goes back to its key's line.
func (t *txn) settleLeased(ctx context.Context, queue string, got []leased, now int64) ([]broker.Lease, error) {
	sort.Slice(got, func(i, j int) bool {
		a, b := got[i], got[j]
		if a.l.Task.Priority != b.l.Task.Priority {
			return a.l.Task.Priority > b.l.Task.Priority
		}
		return a.seq < b.seq
	})
	out := make([]broker.Lease, 0, len(got))
	for _, x := range got {
		task := x.l.Task
		switch {
		case broker.Expired(fromNanos(x.expireAt), fromNanos(now)):
			if err := t.expireUnleased(ctx, task.ID, now); err != nil {
				return nil, err
			}
			continue
		case task.ConcurrencyKey != "":
			ok, err := t.leaseKeyed(ctx, queue, task.ConcurrencyKey)
			if err != nil {
				return nil, err
			}
			if !ok {
				if _, err := t.exec(ctx, `UPDATE conveyor_tasks SET state = 2, held = true, started_at = $2,
					lease_session = NULL, lease_token = NULL, lease_expiry = NULL WHERE id = $1`, task.ID, x.started); err != nil {
					return nil, err
				}
				t.moved(queue, broker.StatePending, broker.StatePending, true, false)
				continue
			}
		}
		t.moved(queue, broker.StatePending, broker.StateActive, true, false)
		t.leaseTimer(nanos(x.l.Expiry))
		out = append(out, x.l)
	}
	return out, nil
}

// expireUnleased archives a task just taken from the ready line whose
// expiry or deadline had passed: it leaves the ready line, not to run.
func (t *txn) expireUnleased(ctx context.Context, id string, now int64) error {
	lt, err := t.loadLive(ctx, id)
	if err != nil || lt == nil {
		return err
	}
	lt.state = broker.StatePending // as it was: it never ran
	return t.expire(ctx, lt, now)
}

// scanTaskWith reads a row of taskColumns followed by more columns.
func scanTaskWith(row pgx.Row, more ...any) (*broker.Task, error) {
	return scanTask(extraScanner{row: row, more: more})
}

// extraScanner appends destinations to a Scan.
type extraScanner struct {
	row  pgx.Row
	more []any
}

func (s extraScanner) Scan(dest ...any) error { return s.row.Scan(append(dest, s.more...)...) }

// reserve takes, under the queue's caps, up to n of its dispatchable
// tasks for a Lease call in progress in t, and returns how many, the time
// to stamp their start with, and whether the queue is capped. The time is
// now, or for a queue with a rate limit the time its bucket counted the
// tokens at, if later (a call that read the clock before another one, and
// reserves after it, is counted at the other's time: its leases are
// stamped so, never before the tokens they took).
func (e *Engine) reserve(t *txn, queue string, n int, now time.Time) (int, time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.hints.queues[queue]
	if q == nil || e.closed || n <= 0 {
		return 0, now, false
	}
	avail := e.dispatchableLocked(q, now) // before t's own count in it
	own := t.ownFirst(q, n)
	n = own + min(n-own, avail)
	q.noteStarved()
	if n > 0 {
		e.reservedLocked(q, n, now)
	}
	if q.cfg.RatePerSecond > 0 && q.bucket.Last > nanos(now) {
		now = fromNanos(q.bucket.Last)
	}
	return n, now, isCapped(q.cfg)
}

// ownFirst reserves, of the n tasks a lease in t asks of q, those t
// itself made ready, which the hints learn of only when it commits (an
// enqueue leasing to parked sessions, park.go), and returns how many.
// They count as ready and reserved until t ends. A paused or capped
// queue's are left to its caps, as ready tasks, once t commits.
func (t *txn) ownFirst(q *queueHint, n int) int {
	own := int(min(t.ownReady(q.name), int64(n)))
	if own <= 0 || q.paused || isCapped(q.cfg) {
		return 0
	}
	q.owned += int64(own)
	if t.owned == nil {
		t.owned = map[string]int64{}
	}
	t.owned[q.name] += int64(own)
	return own
}

// reservedLocked reserves n of q's tasks for a call in progress, with
// their rate tokens.
func (e *Engine) reservedLocked(q *queueHint, n int, now time.Time) {
	q.leasing += int64(n)
	if q.cfg.RatePerSecond > 0 {
		q.rateReserved += int64(n)
	}
	e.tookLocked(q, n, now)
}

// refusal is the database's rate bucket after it refused tokens the
// memory's had, for the memory to take (adoptBucketLocked): for fired
// group gid of n members (gid 0: for tasks alone).
type refusal struct {
	bucket broker.RateBucket[int64]
	gid    int64
	n      int
}

// unreserve gives back what a Lease call reserved and did not take (its
// rate tokens too); what it took stays reserved until t ends, when the
// queue's ACTIVE count has them (or they are given back). When the
// database refused rate tokens (refused not nil), the memory's bucket
// becomes the database's.
func (e *Engine) unreserve(t *txn, queue string, reserved, took int, refused *refusal) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.hints.queues[queue]
	if q == nil {
		return
	}
	q.leasing -= int64(reserved - took)
	q.rateReserved = max(q.rateReserved-int64(reserved), 0)
	if q.cfg.RatePerSecond > 0 {
		q.bucket.Tokens += float64(reserved - took)
	}
	if refused != nil {
		e.adoptBucketLocked(q, refused.bucket, refused.gid, refused.n)
	}
	if took > 0 {
		if t.leasing == nil {
			t.leasing = map[string]int64{}
		}
		t.leasing[queue] += int64(took)
	}
	if reserved > took && q.starved {
		q.starved = false
		if e.dispatchableLocked(q, e.cfg.Now()) > 0 {
			e.note.TasksReady(q.name)
		}
	}
}

// reserveGroup decides, under the queue's caps, whether fired group gid
// with live members may go now: how many members its batch takes (all,
// or as many as the cap allows at all), whether they fit under the cap
// now, and whether the rate limit lets them go. What goes is reserved.
// It reports too whether the queue is capped.
func (e *Engine) reserveGroup(queue string, gid int64, live int, now time.Time) (n int, fits, goes, capped bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.hints.queues[queue]
	if q == nil || e.closed {
		return 0, false, false, false
	}
	capped = isCapped(q.cfg)
	n = q.cfg.BatchSize(live)
	if int64(n) > q.cfg.ActiveRoom(q.counts[broker.StateActive]+q.leasing) {
		return n, false, false, capped
	}
	if !e.groupTokensLocked(q, gid, n, now) {
		return n, true, false, capped
	}
	e.reservedLocked(q, n, now)
	return n, true, true, capped
}

// queueCapped reports whether queue is capped, as the memory knows it.
func (e *Engine) queueCapped(queue string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.hints.queues[queue]
	return q != nil && isCapped(q.cfg)
}

// queuePaused reports whether queue is paused.
func (e *Engine) queuePaused(queue string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.hints.queues[queue]
	return q == nil || q.paused
}
