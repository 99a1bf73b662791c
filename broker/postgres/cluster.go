package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file is membership and leadership: several engines (nodes) on one
// database. Each node registers in conveyor_nodes and renews last_seen on
// a heartbeat, on the database's clock. One node at a time holds the row
// of conveyor_leader for a term; it renews it on the same heartbeat, and
// any node takes it, with the term one higher, once it expired. The leader
// sweeps: it deletes the nodes whose heartbeat lapsed (Liveness) and
// releases, with no retry counted, the ACTIVE tasks of nodes that are gone.
// A node that finds its own row deleted (it was cut off long enough to be
// declared dead) rejoins under a new id: its old leases were released, and
// their lease tokens refuse anything it still sends for them.

// DefaultLiveness is how long a node's heartbeat may lapse before the
// others declare it dead (Config.Liveness).
const DefaultLiveness = 15 * time.Second

// heartbeatEvery and leaderTerm derive from the liveness: a node beats five
// times per liveness, and the leader's term lasts a third of it (renewed on
// each beat), so that a dead leader is replaced within liveness/3 plus one
// beat.
func heartbeatEvery(liveness time.Duration) time.Duration { return liveness / 5 }
func leaderTerm(liveness time.Duration) time.Duration     { return liveness / 3 }

// cluster is this node's membership and leadership.
type cluster struct {
	mu      sync.Mutex
	id      string
	leading bool
	term    int64
	// changed is closed, and replaced, at each change of leading.
	changed chan struct{}
	// lapse drops the leadership when its term ends without a renewal
	// (the database unreachable).
	lapse *time.Timer

	// beats counts the heartbeats (read by tests); resyncAt is the beat
	// at which the hints are read again (0: none planned), the
	// heartbeat's alone.
	beats    atomic.Int64
	resyncAt int64
	// releasedFor lists the nodes (their ids, in order) there were when
	// the leader's sweep last released the leases of nodes that are gone,
	// and sweepsSince counts its sweeps since (sweepOwed), the heartbeat's
	// alone.
	releasedFor string
	sweepsSince int

	stop chan struct{}
	done chan struct{}
}

func (c *cluster) init(id string) {
	c.id = id
	c.changed = make(chan struct{})
	c.stop = make(chan struct{})
	c.done = make(chan struct{})
}

// NodeID is this node's id now; see broker.Clustered.
func (e *Engine) NodeID() string {
	e.cluster.mu.Lock()
	defer e.cluster.mu.Unlock()
	return e.cluster.id
}

// Leading reports whether this node leads; see broker.Clustered.
func (e *Engine) Leading() (bool, <-chan struct{}) {
	e.cluster.mu.Lock()
	defer e.cluster.mu.Unlock()
	return e.cluster.leading, e.cluster.changed
}

// Nodes lists the live nodes; see broker.Clustered.
func (e *Engine) Nodes(ctx context.Context) ([]broker.Node, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := e.pool.Query(ctx, `SELECT n.id, n.address, n.version, n.started_at, n.last_seen,
			coalesce(l.node = n.id AND l.expires_at > now(), false)
		FROM conveyor_nodes n LEFT JOIN conveyor_leader l ON true
		WHERE n.last_seen >= now() - $1::interval ORDER BY n.id`, e.cfg.Liveness)
	if err != nil {
		return nil, e.storageError(err)
	}
	nodes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (broker.Node, error) {
		var n broker.Node
		err := row.Scan(&n.ID, &n.Address, &n.Version, &n.StartedAt, &n.LastSeen, &n.Leader)
		return n, err
	})
	return nodes, e.storageError(err)
}

// join registers this node under a new id, and tries for the leadership
// at once (a lone node leads from its start).
func (e *Engine) join(ctx context.Context) error {
	id := "n" + e.ids.next(time.Now())
	var peers int64
	if err := e.pool.QueryRow(ctx, `WITH me AS (INSERT INTO conveyor_nodes (id, address, version) VALUES ($1, $2, $3))
		SELECT count(*) FROM conveyor_nodes WHERE last_seen >= now() - $4::interval`,
		id, e.cfg.NodeAddress, e.cfg.NodeVersion, e.cfg.Liveness).Scan(&peers); err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	e.cluster.mu.Lock()
	e.cluster.id = id
	e.cluster.mu.Unlock()
	if err := e.events.announce(ctx, peers); err != nil {
		return fmt.Errorf("announce the node: %w", err)
	}
	e.tryLead(ctx)
	return nil
}

// runHeartbeat beats until the engine closes.
func (e *Engine) runHeartbeat() {
	defer close(e.cluster.done)
	every := heartbeatEvery(e.cfg.Liveness)
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-e.cluster.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		if err := e.beat(ctx); err != nil && !e.isClosed() {
			e.log.Warn("node heartbeat failed", "node", e.NodeID(), "err", err)
		}
		cancel()
	}
}

// beat renews this node's row (rejoining when it was declared dead), its
// leadership, and, as the leader, sweeps the dead nodes.
func (e *Engine) beat(ctx context.Context) error {
	id := e.NodeID()
	var peers int64
	err := e.pool.QueryRow(ctx, `UPDATE conveyor_nodes SET last_seen = now() WHERE id = $1
		RETURNING (SELECT count(*) FROM conveyor_nodes WHERE id <> $1 AND last_seen >= now() - $2::interval)`,
		id, e.cfg.Liveness).Scan(&peers)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return e.storageError(err)
	}
	e.peersSeen(peers)
	if errors.Is(err, pgx.ErrNoRows) {
		e.log.Warn("this node was declared dead (its heartbeat lapsed): rejoining under a new id; the tasks it held were released",
			"node", id)
		e.setLeading(false, 0)
		e.hintsStale.Store(true) // the released tasks are others' news now
		e.startResync()
		return e.join(ctx)
	}
	e.tryLead(ctx)
	if leading, _ := e.Leading(); leading {
		return e.sweep(ctx)
	}
	return nil
}

// peersSeen records how many other nodes are live. While there are any,
// this node sends its notifications, and reads its hints again every
// resyncEvery; a node that just joined, or that just saw its first peer,
// reads them again once the others have seen it (two beats): what they
// committed before they started to notify it reaches it so.
func (e *Engine) peersSeen(peers int64) {
	c := &e.cluster
	was := e.events.peers.Swap(peers)
	beats := c.beats.Add(1)
	switch {
	case peers == 0:
		c.resyncAt = 0
	case was == 0 || c.resyncAt == 0:
		c.resyncAt = beats + 2
	case beats >= c.resyncAt:
		c.resyncAt = beats + int64(resyncEvery/heartbeatEvery(e.cfg.Liveness))
		e.hintsStale.Store(true)
		e.startResync()
	}
}

// tryLead takes or renews the leadership when it is free or this node's.
// The term runs on the database's clock; this node counts it from before
// it asked, on its own, so that it never believes it leads after the
// database let another node take over.
func (e *Engine) tryLead(ctx context.Context) {
	asked := time.Now()
	term := leaderTerm(e.cfg.Liveness)
	var got int64
	err := e.pool.QueryRow(ctx, `INSERT INTO conveyor_leader (node, term, expires_at) VALUES ($1, 1, now() + $2::interval)
		ON CONFLICT (one) DO UPDATE SET
			term = CASE WHEN conveyor_leader.node = excluded.node THEN conveyor_leader.term ELSE conveyor_leader.term + 1 END,
			node = excluded.node, expires_at = excluded.expires_at
		WHERE conveyor_leader.node = excluded.node OR conveyor_leader.expires_at < now()
		RETURNING term`, e.NodeID(), term).Scan(&got)
	switch {
	case err == nil:
		e.setLeading(true, got)
		e.armLapse(time.Until(asked.Add(term)))
	case errors.Is(err, pgx.ErrNoRows):
		e.setLeading(false, 0)
	default:
		// Unknown: the term already counted lapses on its own.
	}
}

// armLapse drops the leadership after d unless a renewal re-arms it.
func (e *Engine) armLapse(d time.Duration) {
	c := &e.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lapse != nil {
		c.lapse.Stop()
	}
	term := c.term
	c.lapse = time.AfterFunc(d, func() {
		c.mu.Lock()
		still := c.leading && c.term == term
		c.mu.Unlock()
		if still {
			e.log.Warn("leadership lapsed: its term could not be renewed", "node", e.NodeID(), "term", term)
			e.setLeading(false, 0)
		}
	})
}

// setLeading records the leadership, signalling a change.
func (e *Engine) setLeading(leading bool, term int64) {
	c := &e.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	was := c.leading
	c.leading, c.term = leading, term
	if was != leading {
		close(c.changed)
		c.changed = make(chan struct{})
		if leading {
			e.log.Info("this node leads", "node", c.id, "term", term)
		}
	}
}

// sweep deletes the nodes whose heartbeat lapsed and releases the ACTIVE
// tasks of every node that is gone, under the leader's term: the term's
// row is locked for the transaction, so no other node takes over before
// it commits, and a term that ended refuses it.
func (e *Engine) sweep(ctx context.Context) error { return e.sweepWith(ctx, e.inTx, true) }

// sweepAtOpen is sweep while the engine opens: its hints, loaded after,
// see what it did.
func (e *Engine) sweepAtOpen(ctx context.Context) error { return e.sweepWith(ctx, e.inTxOpen, false) }

func (e *Engine) sweepWith(ctx context.Context, run func(context.Context, func(*txn) error) error, opened bool) error {
	e.cluster.mu.Lock()
	id, term := e.cluster.id, e.cluster.term
	e.cluster.mu.Unlock()
	var dead []string
	var nodes string
	released, releasing := 0, false
	err := run(ctx, func(t *txn) error {
		var held bool
		if err := t.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM conveyor_leader WHERE node = $1 AND term = $2
			AND expires_at > now() FOR SHARE)`, id, term).Scan(&held); err != nil {
			return err
		}
		if !held {
			return errNotLeader
		}
		rows, err := t.query(ctx, `DELETE FROM conveyor_nodes WHERE last_seen < now() - $1::interval RETURNING id`, e.cfg.Liveness)
		if err != nil {
			return err
		}
		if dead, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		if err := t.queryRow(ctx, `SELECT coalesce(string_agg(id, ',' ORDER BY id), '') FROM conveyor_nodes`).Scan(&nodes); err != nil {
			return err
		}
		if releasing = !opened || e.sweepOwed(nodes, len(dead) > 0); !releasing {
			return nil
		}
		released, err = t.releaseLeases(ctx, `(lease_node IS NULL OR NOT EXISTS (SELECT 1 FROM conveyor_nodes n WHERE n.id = lease_node))`)
		return err
	})
	if errors.Is(err, errNotLeader) {
		e.setLeading(false, 0)
		return nil
	}
	if err != nil {
		return err
	}
	if releasing {
		e.cluster.mu.Lock()
		e.cluster.releasedFor, e.cluster.sweepsSince = nodes, 0
		e.cluster.mu.Unlock()
	}
	if len(dead) > 0 || released > 0 {
		e.log.Warn("swept dead nodes", "nodes", dead, "tasks_released", released)
	}
	if len(dead) > 0 && opened {
		// What the dead nodes committed and had not told the others of is
		// read again, here and on every node.
		e.hintsStale.Store(true)
		e.startResync()
		e.events.requestResync()
	}
	return nil
}

var errNotLeader = errors.New("postgres: this node no longer leads")

// fullSweepEvery: of the sweeps since the last that released the leases
// of nodes that are gone, the fullSweepEvery-th releases them whatever
// changed.
const fullSweepEvery = 10

// sweepOwed reports whether the leader's sweep is to release the leases
// of nodes that are gone, given the nodes now (nodes: their ids, in
// order) and whether it deleted dead ones: when the set of nodes changed
// since the last sweep that did, or after fullSweepEvery sweeps that did
// not. The release reads every ACTIVE task's index entry (32-53 ms a call
// at W3's load, docs/benchmarks.md, the fifteenth pass), and a lease of a
// node that is gone comes from a node that died (its row deleted: the set
// changed) or left; the periodic one catches a lease stamped with the id
// of a node declared dead by a transaction that committed after the sweep
// that released its others (the node had not learned it yet).
func (e *Engine) sweepOwed(nodes string, deleted bool) bool {
	c := &e.cluster
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sweepsSince++
	return deleted || nodes != c.releasedFor || c.sweepsSince >= fullSweepEvery
}

// releaseLeases makes PENDING again, with no retry counted, the ACTIVE
// tasks cond selects (a condition on conveyor_tasks, whose parameters are
// args): their sessions are gone. They keep their place under their
// concurrency keys (ready instead of ACTIVE). A task an operator canceled
// while it ran is canceled for good instead, as for a closed stream
// (broker.Decision.Canceled); an at-most-once task whose attempt's start
// was authorized is archived, its outcome unknown, never run again
// (broker.UnknownRestart); one sent to a push endpoint has its attempt
// counted (broker.InterruptedPush). It returns how many tasks it released.
func (t *txn) releaseLeases(ctx context.Context, cond string, args ...any) (int, error) {
	rows, err := t.query(ctx, `WITH released AS (
			UPDATE conveyor_tasks SET state = 2, ready_seq = nextval('conveyor_ready_seq'), lease_session = NULL,
				lease_token = NULL, lease_expiry = NULL, lease_limit = NULL, lease_node = NULL
			WHERE state = 3 AND NOT canceled AND NOT start_authorized AND NOT push_invoked AND `+cond+`
			RETURNING queue, concurrency_key),
		keys AS (
			UPDATE conveyor_ckeys c SET active = c.active - r.n
			FROM (SELECT queue, concurrency_key, count(*) AS n FROM released
				WHERE concurrency_key IS NOT NULL GROUP BY 1, 2) r
			WHERE c.queue = r.queue AND c.key = r.concurrency_key)
		SELECT queue, count(*) FROM released GROUP BY queue`, args...)
	if err != nil {
		return 0, err
	}
	type queueCount struct {
		queue string
		n     int64
	}
	counts, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (queueCount, error) {
		var c queueCount
		err := row.Scan(&c.queue, &c.n)
		return c, err
	})
	if err != nil {
		return 0, err
	}
	released := 0
	for _, c := range counts {
		d := t.q(c.queue)
		d.counts[broker.StateActive] -= c.n
		d.counts[broker.StatePending] += c.n
		d.ready += c.n
		d.readied = true
		released += int(c.n)
	}
	ids, err := t.query(ctx, `SELECT id FROM conveyor_tasks WHERE state = 3 AND (canceled OR start_authorized OR push_invoked) AND `+cond, args...)
	if err != nil {
		return 0, err
	}
	ended, err := collectStrings(ids)
	if err != nil {
		return 0, err
	}
	now := nanos(time.Now())
	for _, id := range ended {
		lt, err := t.loadLive(ctx, id)
		if err != nil {
			return 0, err
		}
		if err := t.endGone(ctx, lt, now); err != nil {
			return 0, err
		}
	}
	return released + len(ended), nil
}

// endGone ends, at now, an ACTIVE task whose session is gone and that may
// not be released: canceled by an operator while it ran, it is CANCELED;
// started under authorization, it is ARCHIVED, its outcome unknown; sent
// to a push endpoint, its attempt counts (broker.InterruptedPush).
func (t *txn) endGone(ctx context.Context, lt *liveTask, now int64) error {
	if lt.canceled {
		return t.finish(ctx, lt, broker.StateCanceled, now, finishFields{})
	}
	if lt.pushInvoked && !lt.startAuthorized {
		msg := broker.InterruptedPushError
		if _, to := broker.InterruptedPush(lt.retried, lt.maxRetry); to == broker.StateArchived {
			return t.finish(ctx, lt, broker.StateArchived, now, finishFields{lastError: &msg, failure: true})
		}
		return t.toPending(ctx, lt, now, pendingFields{failure: &msg})
	}
	msg := broker.OutcomeUnknownPrefix + broker.UnknownRestart
	return t.finish(ctx, lt, broker.StateArchived, now, finishFields{lastError: &msg, failure: true})
}

// leave deletes this node's row and ends its term, if it leads (a clean
// stop). The tasks its sessions still hold stay ACTIVE, now of no live
// node: the leader releases them at its next beat, or a node opening on
// the database at once (as one server restarting does), without waiting
// for this node's liveness to lapse.
func (e *Engine) leave(ctx context.Context) error {
	id := e.NodeID()
	err := e.inTx(ctx, func(t *txn) error {
		// The leader's row stays, with its term, so that the next
		// leader's is higher: a term is never used twice.
		if _, err := t.exec(ctx, `UPDATE conveyor_leader SET expires_at = '-infinity' WHERE node = $1`, id); err != nil {
			return err
		}
		_, err := t.exec(ctx, `DELETE FROM conveyor_nodes WHERE id = $1`, id)
		return err
	})
	e.setLeading(false, 0)
	return err
}

// stopHeartbeat stops the heartbeat and the leadership's lapse timer.
func (e *Engine) stopHeartbeat() {
	close(e.cluster.stop)
	<-e.cluster.done
	e.cluster.mu.Lock()
	if e.cluster.lapse != nil {
		e.cluster.lapse.Stop()
	}
	e.cluster.mu.Unlock()
}

var _ broker.Clustered = (*Engine)(nil)
