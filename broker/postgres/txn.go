package postgres

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/conveyor-dev/conveyor/broker"
)

// txn is one attempt at a transaction: the transaction (pipeTx), and what its
// statements did that the engine learns of only once it commits (the
// changes to the hints, the signals to send). A transaction the database
// refuses is run again with a fresh txn, so nothing of a failed attempt
// reaches the hints.
type txn struct {
	e  *Engine
	tx *pipeTx
	// queues holds, per queue touched, what the transaction changed.
	queues map[string]*queueDelta
	// Timer times the transaction added (0: none), for TimersChanged.
	promoteAt, leaseAt, purgeOwnAt int64
	ended                          [numClasses]int64
	cronsChanged                   bool
	lapsed                         []broker.LapsedLease
	// canceledRunning are the running tasks an operator canceled, for the
	// other nodes (the session holding one may be on another).
	canceledRunning []broker.LapsedLease
	// xid is the transaction's id, read before its commit while other
	// nodes are live: they learn of its changes with it (events.go), so
	// that a resync of theirs that saw it does not count them twice.
	xid uint64
	// after runs once the transaction committed, under no lock.
	after []func()
	// entering counts, per queue, the new tasks admitted under its bound
	// (bound.go), and leasing the tasks leased under its caps (lease.go):
	// the queue's hints count them as reserved until the transaction ends.
	entering, leasing map[string]int64
	// owned counts, per queue, the tasks it made ready that it reserved
	// to lease itself (queueHint.owned).
	owned map[string]int64
	// caps holds the capped queues whose rows the transaction locked
	// (caps.go).
	caps map[string]*capped
	// seqBase is the highest ready_seq this node's leases were given when
	// the transaction began: every ready_seq it draws is higher. watches
	// are its leases' watches on the scan floors they walked from, and
	// raises the raises of those floors, applied when it commits
	// (floorwatch.go).
	seqBase int64
	watches map[string]*floorWatch
	raises  []floorRaise
	// plannedWithout are the planner methods the transaction turned off,
	// and generic is set while its statements take their generic plans
	// (plan.go).
	plannedWithout []string
	generic        bool
}

// floorRaise raises a queue's scan floors (scanfloor.go), under e.mu.
type floorRaise struct {
	queue string
	apply func(q *queueHint)
}

// queueDelta is what a transaction changed of one queue.
type queueDelta struct {
	counts broker.Counts
	// ready changes the number of PENDING tasks not held back; readied is
	// set when the transaction made any ready (floorwatch.go).
	ready   int64
	readied bool
	// groups holds the fired groups changed, by gid (live 0: gone).
	groups map[int64]firedGroup
	// Totals, written to the database by flush and to the hints after.
	enqueued, processed, failed, expired int64
}

func newTxn(e *Engine, tx *pipeTx) *txn {
	return &txn{e: e, tx: tx, queues: map[string]*queueDelta{}, seqBase: e.seqSeen.Load()}
}

func (t *txn) q(name string) *queueDelta {
	d := t.queues[name]
	if d == nil {
		d = &queueDelta{}
		t.queues[name] = d
	}
	return d
}

// moved records that a task of queue left state from for state to (0 for
// either: none, an insert or a delete), and whether it was, and is, ready
// (PENDING, not held).
func (t *txn) moved(queue string, from, to broker.State, wasReady, isReady bool) {
	d := t.q(queue)
	if from != 0 {
		d.counts[from]--
	}
	if to != 0 {
		d.counts[to]++
	}
	if wasReady {
		d.ready--
	}
	if isReady {
		d.ready++
		d.readied = true
	}
}

// ownReady is how many tasks of queue t made ready so far and has not
// reserved yet (none, when it took more from the line than it put in).
func (t *txn) ownReady(queue string) int64 {
	if d := t.queues[queue]; d != nil {
		return max(d.ready-t.owned[queue], 0)
	}
	return 0
}

// timer records a time added to a timer class, keeping the earliest.
func earliest(cur *int64, at int64) {
	if at != 0 && (*cur == 0 || at < *cur) {
		*cur = at
	}
}

func (t *txn) promoteTimer(at int64) { earliest(&t.promoteAt, at) }
func (t *txn) leaseTimer(at int64)   { earliest(&t.leaseAt, at) }

// ended records a task that became terminal, for the purge timer: with a
// retention of its own (purgeAt) or by its class's horizon.
func (t *txn) endedTask(to broker.State, completedAt int64, purgeAt *int64) {
	if purgeAt != nil {
		earliest(&t.purgeOwnAt, *purgeAt)
		return
	}
	earliest(&t.ended[classOf(to)], completedAt)
}

// exec runs a statement.
func (t *txn) exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return t.tx.Exec(ctx, sql, args...)
}

// query runs a statement that returns rows.
func (t *txn) query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return t.tx.Query(ctx, sql, args...)
}

// queryRow runs a statement that returns one row.
func (t *txn) queryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return t.tx.QueryRow(ctx, sql, args...)
}

// totalShards is how many rows spread each queue's totals. Each update of
// a row leaves a version that a snapshot held open keeps, and the next
// update of the row reads past every one: spread over 64 rows, a queue
// taking 600 commits a second leaves each row about 1,100 versions in a
// two-minute hold instead of 9,000 over 8 (docs/benchmarks.md).
const totalShards = 64

// flush writes the rate buckets the transaction changed, and its queue
// totals, each queue's into one of its rows picked at random, so that
// concurrent transactions seldom wait for the same row. The totals go out
// with the COMMIT (pipeTx.atCommit): nothing reads what they return.
func (t *txn) flush(ctx context.Context) error {
	if err := t.writeCaps(ctx); err != nil {
		return err
	}
	if err := t.readXID(ctx); err != nil {
		return err
	}
	names := make([]string, 0, len(t.queues))
	for name, d := range t.queues {
		if d.enqueued != 0 || d.processed != 0 || d.failed != 0 || d.expired != 0 {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names) // one order for every transaction: no deadlock
	shard := rand.IntN(totalShards)
	var enq, proc, fail, exp []int64
	for _, name := range names {
		d := t.queues[name]
		enq, proc, fail, exp = append(enq, d.enqueued), append(proc, d.processed), append(fail, d.failed), append(exp, d.expired)
	}
	t.tx.atCommit(addTotalsSQL, names, shard, enq, proc, fail, exp)
	return nil
}

// addTotalsSQL adds to the totals of the queues named in $1, in their
// rows of shard $2, what they enqueued ($3), processed ($4), failed ($5)
// and expired ($6).
const addTotalsSQL = `
	INSERT INTO conveyor_queue_totals AS t (queue, shard, enqueued, processed, failed, expired)
	SELECT q, $2, e, p, f, x FROM unnest($1::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[]) AS u(q, e, p, f, x)
	ON CONFLICT (queue, shard) DO UPDATE SET enqueued = t.enqueued + excluded.enqueued,
		processed = t.processed + excluded.processed, failed = t.failed + excluded.failed,
		expired = t.expired + excluded.expired`

// readXID reads the transaction's id, for the other nodes, when there are
// any and it changed what they count.
func (t *txn) readXID(ctx context.Context) error {
	if len(t.queues) == 0 || t.e.events.peers.Load() == 0 {
		return nil
	}
	var s string
	if err := t.queryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&s); err != nil {
		return err
	}
	xid, err := strconv.ParseUint(s, 10, 64)
	t.xid = xid
	return err
}
