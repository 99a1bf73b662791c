package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is what the engine keeps in memory: per-queue counts and
// configuration (Ready, Queues and the signals read them instead of the
// database), the rate buckets, and the earliest time each timer loop was
// told of. The database is the truth; the hints follow it from what each
// committed transaction says it did (txn), and are loaded from it on open.
// On one node they are exact.

// Purge classes: COMPLETED tasks, and ARCHIVED or CANCELED ones, go by
// their own horizons.
const (
	classCompleted = iota
	classFailed
	numClasses
)

func classOf(s broker.State) int {
	if s == broker.StateCompleted {
		return classCompleted
	}
	return classFailed
}

type hints struct {
	queues map[string]*queueHint
	// The earliest time each timer loop was last told of (0: none), so
	// that only an earlier one signals TimersChanged.
	nextPromote, nextLease, purgeOwn int64
	ended                            [numClasses]int64
	// clockStart is the first time a caller gave the engine since it
	// opened (PromoteDue's): rate buckets start empty then (see
	// refillLocked).
	clockStart int64
	// bounded counts the queues with a MaxWaiting bound.
	bounded int
	// rateWaits names the queues whose sessions wait for their rate
	// bucket to refill (bucket.wakeAt): PromoteDue wakes them
	// (ratelimit.go).
	rateWaits map[string]struct{}
}

func (h *hints) init() {
	h.queues = map[string]*queueHint{}
	h.rateWaits = map[string]struct{}{}
}

// firedGroup is a fired group waiting for a session of its type.
type firedGroup struct {
	typ  string
	live int
}

// queueHint is one queue, as the engine knows it.
type queueHint struct {
	name   string
	paused bool
	cfg    broker.QueueConfig
	counts broker.Counts
	// ready counts the PENDING tasks not held back by their key.
	ready int64
	// fired holds the fired groups waiting, by gid.
	fired map[int64]firedGroup
	// leasing counts the tasks Lease calls in progress may take (reserved
	// under the caps before their statements run).
	leasing int64
	// owned counts the tasks that transactions in flight made ready and
	// lease themselves (an enqueue's to parked sessions, park.go): ready
	// in those transactions only, and counted in leasing as well.
	owned int64
	// starved is set when a caller was told of fewer dispatchable tasks
	// than are ready because Lease calls in progress reserved them: when
	// one of those gives back what it did not take (a routed lease passes
	// over what it cannot run), the queue is signaled again, for the
	// session that was told there was nothing (unreserve).
	starved bool
	// rateReserved counts the rate tokens those calls took from bucket
	// before the database's bucket decided (caps.go).
	rateReserved int64
	// entering counts the new tasks enqueue calls in progress admitted
	// under the queue's bound (bound.go); refused is set once the bound
	// refused a task, until the notifier answers that nobody waits.
	entering int64
	refused  bool
	// recheck is the look at the queue armed after a short lease
	// (recheckLater), nil when none is.
	recheck *time.Timer
	// floors are where the queue's leases start their walk of each
	// priority's ready line, and plainFloors where they start the walk of
	// the line without the at-most-once tasks (scanfloor.go).
	floors, plainFloors scanFloors
	// watches are the floor watches of the leases in flight that walk
	// the queue from its floors (floorwatch.go).
	watches map[*floorWatch]struct{}
	// kindFloors are the floors of each kind's part of the typed ready
	// line (conveyor_tasks_ready_type), for typed walks; at most
	// maxKindFloors kinds (scanfloor.go).
	kindFloors map[broker.Kind]*scanFloors
	// passedOver is set once a routed lease came back short while the
	// queue had ready tasks, until its ready count is back at 0: each
	// task that becomes ready meanwhile signals TasksReady. readyChanges
	// counts the changes that made tasks ready (passedover.go).
	passedOver                           bool
	readyChanges                         uint64
	enqueued, processed, failed, expired int64
	bucket                               bucket
}

func (e *Engine) queueLocked(name string) *queueHint {
	q := e.hints.queues[name]
	if q == nil {
		q = &queueHint{name: name, fired: map[int64]firedGroup{}}
		e.hints.queues[name] = q
	}
	return q
}

// loadHints reads the hints from the database: each queue's row, totals
// and per-state counts, and its fired groups.
func (e *Engine) loadHints(ctx context.Context) error {
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	// The other nodes' notifications received meanwhile wait, and skip
	// what the read saw (as for a resync).
	e.remote.Lock()
	defer e.remote.Unlock()
	qs, snap, err := readHintsSnapshot(ctx, conn)
	if err != nil {
		return err
	}
	e.resynced = &snap
	e.mu.Lock()
	defer e.mu.Unlock()
	e.hints.queues = qs
	e.hints.bounded = 0
	for _, q := range qs {
		if q.cfg.MaxWaiting > 0 {
			e.hints.bounded++
		}
	}
	return nil
}

// readHints reads what the database holds of each queue: its row, totals,
// per-state and ready counts, and fired groups.
func readHints(ctx context.Context, db querier) (map[string]*queueHint, error) {
	qs := map[string]*queueHint{}
	get := func(name string) *queueHint {
		q := qs[name]
		if q == nil {
			q = &queueHint{name: name, fired: map[int64]firedGroup{}}
			qs[name] = q
		}
		return q
	}
	err := eachRow(ctx, db, `SELECT name, paused, concurrency_limit, max_active, rate_per_second, rate_burst,
		group_max_size, group_max_delay, group_grace, max_waiting, push_url, push_concurrency, push_timeout
		FROM conveyor_queues`, func(rows pgx.Rows) error {
		var name string
		var cfg broker.QueueConfig
		var paused bool
		var delay, grace, pushTimeout int64
		if err := rows.Scan(&name, &paused, &cfg.ConcurrencyLimit, &cfg.MaxActive, &cfg.RatePerSecond, &cfg.RateBurst,
			&cfg.Group.MaxSize, &delay, &grace, &cfg.MaxWaiting, &cfg.Push.URL, &cfg.Push.Concurrency, &pushTimeout); err != nil {
			return err
		}
		cfg.Group.MaxDelay, cfg.Group.GracePeriod = time.Duration(delay), time.Duration(grace)
		cfg.Push.Timeout = time.Duration(pushTimeout)
		q := get(name)
		q.paused, q.cfg = paused, cfg
		return nil
	})
	if err == nil {
		err = eachRow(ctx, db, `SELECT queue, sum(enqueued), sum(processed), sum(failed), sum(expired)
			FROM conveyor_queue_totals GROUP BY queue`, func(rows pgx.Rows) error {
			var name string
			var t [4]int64
			if err := rows.Scan(&name, &t[0], &t[1], &t[2], &t[3]); err != nil {
				return err
			}
			q := get(name)
			q.enqueued, q.processed, q.failed, q.expired = t[0], t[1], t[2], t[3]
			return nil
		})
	}
	if err == nil {
		err = eachRow(ctx, db, `SELECT queue, state, held, count(*) FROM conveyor_tasks GROUP BY 1, 2, 3`, func(rows pgx.Rows) error {
			var name string
			var state int16
			var held bool
			var n int64
			if err := rows.Scan(&name, &state, &held, &n); err != nil {
				return err
			}
			q := get(name)
			q.counts[state] += n
			if broker.State(state) == broker.StatePending && !held {
				q.ready += n
			}
			return nil
		})
	}
	if err == nil {
		err = eachRow(ctx, db, `SELECT gid, queue, type, live FROM conveyor_groups WHERE fired AND live > 0`, func(rows pgx.Rows) error {
			var gid int64
			var name string
			var g firedGroup
			if err := rows.Scan(&gid, &name, &g.typ, &g.live); err != nil {
				return err
			}
			get(name).fired[gid] = g
			return nil
		})
	}
	return qs, err
}

// eachRow runs sql and calls fn for each row it returns.
func eachRow(ctx context.Context, db querier, sql string, fn func(pgx.Rows) error) error {
	rows, err := db.Query(ctx, sql)
	return forRows(rows, err, fn)
}

// forRows calls fn for each of rows, the answer of a query that failed
// with err or not, and closes them.
func forRows(rows pgx.Rows, err error, fn func(pgx.Rows) error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// applyCommitted applies what a committed transaction did to the hints,
// and sends its signals (its after functions are the caller's to run); the
// other nodes learn of it from this node's next notification (events.go).
func (e *Engine) applyCommitted(t *txn) {
	e.mu.Lock()
	for name, d := range t.queues {
		q := e.queueLocked(name)
		q.entering -= t.entering[name]
		q.leasing -= t.leasing[name]
		q.owned -= t.owned[name]
		if d.readied {
			capFloorsLocked(q, t.seqBase+1)
		}
		e.applyDeltaLocked(q, d)
	}
	for _, r := range t.raises {
		if q := e.hints.queues[r.queue]; q != nil {
			r.apply(q)
		}
	}
	e.dropWatchesLocked(t)
	timers := e.timersAddedLocked(t.promoteAt, t.leaseAt, t.purgeOwnAt, t.ended)
	if timers {
		e.note.TimersChanged()
	}
	if t.cronsChanged {
		e.note.CronsChanged()
	}
	for _, l := range t.lapsed {
		e.note.LeaseLapsed(l)
	}
	e.mu.Unlock()
	e.events.add(t)
}

// applyDeltaLocked applies what a transaction (this node's or another's)
// changed of q, and signals TasksReady when q's sessions have work they
// may not know of.
func (e *Engine) applyDeltaLocked(q *queueHint, d *queueDelta) {
	name := q.name
	wasReady := e.dispatchableLocked(q, e.cfg.Now()) > 0 || e.groupsWaitingLocked(q)
	before := q.counts[broker.StateActive]
	for s, n := range d.counts {
		q.counts[s] += n
	}
	if d.counts.Waiting() < 0 {
		e.roomChangedLocked(q)
	}
	q.ready += d.ready
	newGroup := false
	for gid, g := range d.groups {
		if g.live > 0 {
			_, had := q.fired[gid]
			newGroup = newGroup || !had
			q.fired[gid] = g
			continue
		}
		delete(q.fired, gid)
		if q.bucket.DropHold(gid) && !q.paused && q.ready > 0 {
			e.note.TasksReady(name)
		}
	}
	q.enqueued += d.enqueued
	q.processed += d.processed
	q.failed += d.failed
	q.expired += d.expired
	passedOver := passedOverLocked(q, d)
	if q.paused {
		return
	}
	roomGrew := q.counts[broker.StateActive] < before && q.cfg.MaxActive > 0
	switch {
	case roomGrew && e.groupsWaitingLocked(q):
		// A fired group waits for room under the cap: each task that
		// leaves ACTIVE may be the one it waited for.
		e.note.TasksReady(name)
	case passedOver, newGroup:
		// A session that the tasks waiting are not for may take this one;
		// a group that fired goes to the sessions of its batch type, which
		// the tasks already ready may not be for either.
		e.note.TasksReady(name)
	case d.ready > 0 || len(d.groups) > 0 || roomGrew:
		if !wasReady && (e.dispatchableLocked(q, e.cfg.Now()) > 0 || e.groupsWaitingLocked(q)) {
			e.note.TasksReady(name)
		}
	}
}

// timersAddedLocked records timer times a transaction added, and reports
// whether one was earlier than the loops were told of. They lower the
// loops' floors (timefloors.go).
func (e *Engine) timersAddedLocked(promoteAt, leaseAt, purgeOwnAt int64, ended [numClasses]int64) bool {
	e.timerFloorsLocked(promoteAt, purgeOwnAt, ended)
	timers := false
	if promoteAt != 0 && (e.hints.nextPromote == 0 || promoteAt < e.hints.nextPromote) {
		e.hints.nextPromote, timers = promoteAt, true
	}
	if leaseAt != 0 && (e.hints.nextLease == 0 || leaseAt < e.hints.nextLease) {
		e.hints.nextLease, timers = leaseAt, true
	}
	if purgeOwnAt != 0 && (e.hints.purgeOwn == 0 || purgeOwnAt < e.hints.purgeOwn) {
		e.hints.purgeOwn, timers = purgeOwnAt, true
	}
	for c, at := range ended {
		if at != 0 && e.hints.ended[c] == 0 {
			e.hints.ended[c], timers = at, true
		}
	}
	return timers
}

// applyRemote applies another node's notification, never while a resync
// reads the hints again (e.remote).
func (e *Engine) applyRemote(m *message) {
	e.remote.Lock()
	defer e.remote.Unlock()
	if m.Joined {
		e.events.peers.CompareAndSwap(0, 1) // the next heartbeat counts them all
	}
	if m.Resync || len(m.Configs) > 0 {
		e.hintsStale.Store(true)
		e.startResync()
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	for _, tx := range m.Txns {
		if tx.XID != 0 && e.resynced != nil && e.resynced.saw(tx.XID) {
			continue // the last resync read what it did
		}
		for name, w := range tx.Queues {
			d := &queueDelta{counts: w.Counts, ready: w.Ready, enqueued: w.Totals[0], processed: w.Totals[1],
				failed: w.Totals[2], expired: w.Totals[3]}
			if len(w.Groups) > 0 {
				d.groups = make(map[int64]firedGroup, len(w.Groups))
				for gid, g := range w.Groups {
					d.groups[gid] = firedGroup{typ: g.Type, live: g.Live}
				}
			}
			e.applyDeltaLocked(e.queueLocked(name), d)
		}
	}
	var ended [numClasses]int64
	copy(ended[:], m.Ended)
	if e.timersAddedLocked(m.Promote, 0, m.PurgeOwn, ended) {
		e.note.TimersChanged()
	}
	if m.Crons {
		e.note.CronsChanged()
	}
	e.mu.Unlock()
	if rc, ok := e.note.(broker.RunningCanceler); ok {
		for _, l := range m.Cancels {
			rc.RunningCanceled(l)
		}
	}
}

// groupsWaitingLocked reports whether q has a fired group waiting that
// fits under its cap on ACTIVE tasks now (a group larger than the cap
// goes in parts of the cap).
func (e *Engine) groupsWaitingLocked(q *queueHint) bool {
	if q.cfg.MaxActive <= 0 {
		return len(q.fired) > 0
	}
	room := q.cfg.ActiveRoom(q.counts[broker.StateActive] + q.leasing)
	for _, g := range q.fired {
		if int64(q.cfg.BatchSize(g.live)) <= room {
			return true
		}
	}
	return false
}

// dispatchableLocked is how many of q's ready tasks may be leased at now:
// its ready count, bounded by the room under its cap on ACTIVE tasks and
// by the tokens in its rate bucket.
func (e *Engine) dispatchableLocked(q *queueHint, now time.Time) int {
	if q.paused {
		return 0
	}
	n := min(q.ready+q.owned-q.leasing, q.cfg.ActiveRoom(q.counts[broker.StateActive]+q.leasing))
	if q.cfg.RatePerSecond > 0 && n > 0 {
		e.refillLocked(q, now, q.cfg)
		allowed, wake := q.bucket.Alone(n, now.UnixNano(), q.cfg)
		if n = allowed; n == 0 {
			e.armRefillLocked(q, wake)
		}
	}
	return int(max(n, 0))
}

// Ready reports each queue's dispatchable task count; see broker.Broker.
func (e *Engine) Ready(queues []string, counts []int) {
	now := e.cfg.Now()
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, name := range queues {
		counts[i] = 0
		if q := e.hints.queues[name]; q != nil && !e.closed {
			counts[i] = e.dispatchableLocked(q, now)
			q.noteStarved()
		}
	}
}

// ReadyGroups reports the fired groups waiting per queue; see broker.Broker.
func (e *Engine) ReadyGroups(queues, types []string, counts []int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i, name := range queues {
		counts[i] = 0
		q := e.hints.queues[name]
		if q == nil || q.paused || e.closed {
			continue
		}
		for _, g := range q.fired {
			if slices.Contains(types, g.typ) {
				counts[i]++
			}
		}
	}
}

// noteStarved records, for a caller just told q's dispatchable count (Ready,
// a Lease's reservation), that Lease calls in progress held some of the
// ready tasks back from it (starved).
func (q *queueHint) noteStarved() {
	if q.leasing > 0 && q.ready > 0 {
		q.starved = true
	}
}
