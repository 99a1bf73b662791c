package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/conveyor-dev/conveyor/broker"
)

// A new connection's first statements are slow: its backend's catalog
// caches start empty, and each statement is parsed and planned for the
// first time on it (a lease's generic plan takes 5-9 ms to make). A fresh
// server that opened its connections as the load came served its first
// half second at 19-37 ms a task, and that half second held most of W4's
// 99th percentile (docs/benchmarks.md, the fifteenth and seventeenth
// passes). So:
//   - Open opens every connection of the pool and runs the hot statements
//     once on each (warmPool), and the pool keeps them open (its MinConns
//     is its MaxConns);
//   - a worker's session tells the engine its route when it opens, and a
//     push endpoint's consumer before its first lease
//     (broker.LeaseWarmer): the first time a shape of lease statement is
//     named, it is run once on every idle connection (WarmLeases);
//   - a connection the pool makes later (one past its lifetime replaced,
//     or after an outage) runs the hot statements and every shape named
//     so far before the pool hands it out (the pool's AfterConnect hook).
//
// Each runs the statements as the engine sends them (the same text, so
// the same prepared statement in the connection's cache, with the same
// planner settings), in a transaction it rolls back, on rows that match
// nothing.

// warmUp runs the hot statements and the lease statements of shapes on
// conn.
func (e *Engine) warmUp(ctx context.Context, conn pipeConn, shapes []leaseShape) error {
	return e.warmWith(ctx, conn, func(t *txn) error {
		if err := t.warmHot(ctx); err != nil {
			return err
		}
		for _, s := range shapes {
			if err := t.warmLeases(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
}

// warmWith runs fn on conn in a transaction it rolls back.
func (e *Engine) warmWith(ctx context.Context, conn pipeConn, fn func(t *txn) error) error {
	t := newTxn(e, &pipeTx{conn: conn})
	err := fn(t)
	return errors.Join(err, t.tx.Rollback(context.WithoutCancel(ctx)))
}

// warmHot runs the hot statements but the leases': the enqueue of a few
// tasks, the totals, a batch of Results and a single one.
func (t *txn) warmHot(ctx context.Context) error {
	if _, err := t.exec(ctx, insertTasksSQL, newRowArgs(nil, nil, 0)...); err != nil {
		return err
	}
	if _, err := t.exec(ctx, createQueuesSQL, []string{}); err != nil {
		return err
	}
	if _, err := t.exec(ctx, addTotalsSQL, []string{}, 0, []int64{}, []int64{}, []int64{}, []int64{}); err != nil {
		return err
	}
	noTask := func(id string) broker.Decision {
		return broker.Decision{Kind: broker.DecideComplete, Verdict: true, Lease: broker.LeaseRef{TaskID: id}}
	}
	if _, err := t.completePlain(ctx, []broker.Decision{noTask("warm-up 1"), noTask("warm-up 2")}); err != nil {
		return err
	}
	t.planAsUsual()
	if _, err := t.loadLive(ctx, ""); err != nil {
		return err
	}
	return t.finish(ctx, &liveTask{state: broker.StateActive}, broker.StateCompleted, 0, finishFields{completed: true, result: []byte{}})
}

// warmLeases runs the lease statements of shape s: a typed walk's from
// its floors and from the start, a line walk's one.
func (t *txn) warmLeases(ctx context.Context, s leaseShape) error {
	w := s.walk()
	if w.kind == walkNone {
		return nil
	}
	var slots leaseSlots
	slots.add(0, "", 0, 0)
	type pick struct {
		sql  string
		args []any
	}
	var picks []pick
	if w.kind == walkTyped {
		sql, args := w.pickFloored(make([]scanFloors, len(w.kinds())))
		picks = append(picks, pick{sql, args})
	}
	sql, args := w.pick(nil)
	picks = append(picks, pick{sql, args})
	for _, p := range picks {
		if _, _, err := t.leaseQueue(ctx, "", 1, p.sql, p.args, leaseArgs{slots: slots}); err != nil {
			return err
		}
	}
	return nil
}

// leaseShape is what the text of a session's lease statements depends
// on: the walk's kind, whether it takes at-most-once tasks, and how many
// types it names (a filtered walk: how many it takes only, 0 when it
// excepts some). A push endpoint's leases are the zero route's statement
// (leaseSQL takes push as an argument).
type leaseShape struct {
	kind       walkKind
	atMostOnce bool
	types      int
}

func shapeOf(w routeWalk) leaseShape {
	return leaseShape{kind: w.kind, atMostOnce: w.atMostOnce, types: len(w.types)}
}

// walk is a walk of shape s, with made-up types.
func (s leaseShape) walk() routeWalk {
	w := routeWalk{kind: s.kind, atMostOnce: s.atMostOnce}
	names := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = strings.Repeat(" ", i+1)
		}
		return out
	}
	switch {
	case s.kind == walkTyped, s.kind == walkFiltered && s.types > 0:
		w.types = names(s.types)
	case s.kind == walkFiltered:
		w.except = names(1)
	}
	return w
}

// leaseShapes are the shapes of lease statement the node's sessions
// named (WarmLeases), each with a channel closed once its first warm-up
// ended.
type leaseShapes struct {
	mu sync.Mutex
	m  map[leaseShape]chan struct{}
}

// add names shape s: it returns its channel, and whether s is new.
func (l *leaseShapes) add(s leaseShape) (chan struct{}, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if ch, ok := l.m[s]; ok {
		return ch, false
	}
	if l.m == nil {
		l.m = map[leaseShape]chan struct{}{}
	}
	ch := make(chan struct{})
	l.m[s] = ch
	return ch, true
}

// all lists the shapes named so far.
func (l *leaseShapes) all() []leaseShape {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]leaseShape, 0, len(l.m))
	for s := range l.m {
		out = append(out, s)
	}
	return out
}

// WarmLeases readies the engine for leases by route r; see
// broker.LeaseWarmer. The first call for a shape of lease statement runs
// it on every connection idle then (a connection busy then plans it when
// it first runs it); a call for a shape named before waits for that
// first warm-up to end.
func (e *Engine) WarmLeases(ctx context.Context, r broker.Route) {
	s := shapeOf(walkOf(r))
	done, first := e.shapes.add(s)
	if !first {
		select {
		case <-done:
		case <-ctx.Done():
		}
		return
	}
	defer close(done)
	idle := e.pool.AcquireAllIdle(ctx)
	next := make(chan *pgxpool.Conn, len(idle))
	for _, c := range idle {
		next <- c
	}
	close(next)
	var wg sync.WaitGroup
	for range min(warmers, len(idle)) {
		wg.Go(func() {
			for c := range next {
				err := e.warmWith(ctx, keptConn{c.Conn()}, func(t *txn) error { return t.warmLeases(ctx, s) })
				if err != nil && ctx.Err() == nil {
					e.log.Warn("warm a database connection for a route's leases", "err", err)
				}
				c.Release()
			}
		})
	}
	wg.Wait()
}

// warmers is how many connections WarmLeases warms at once: each warmed
// goes back to the pool at once, so that a busy node's other calls wait
// for a connection no longer than a warm-up or two.
const warmers = 2

// warmPool opens every connection of the pool and warms each (warmUp),
// then has the pool warm the connections it makes from now on.
func (e *Engine) warmPool(ctx context.Context) error {
	n := int(e.pool.Config().MaxConns)
	conns := make([]*pgxpool.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			c, err := e.pool.Acquire(ctx) // held until all are: n distinct connections
			if err != nil {
				errs[i] = err
				return
			}
			conns[i] = c
			errs[i] = e.warmUp(ctx, keptConn{c.Conn()}, nil)
		})
	}
	wg.Wait()
	for _, c := range conns {
		if c != nil {
			c.Release()
		}
	}
	e.warmNew.Store(true)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("open and warm the pool's %d connections to %s (a smaller pool, or a higher max_connections on the database): %w",
			n, RedactURL(e.cfg.URL), err)
	}
	return nil
}

// warmNewConn is the pool's AfterConnect hook: once Open warmed the pool,
// a connection the pool makes is warmed before it is handed out. A
// warm-up that fails leaves the connection as it is (cold, not broken):
// its statements say whether it works.
func (e *Engine) warmNewConn(ctx context.Context, conn *pgx.Conn) error {
	if !e.warmNew.Load() {
		return nil
	}
	if err := e.warmUp(ctx, keptConn{conn}, e.shapes.all()); err != nil {
		e.log.Warn("warm a new database connection", "err", err)
	}
	return nil
}

// keptConn is a connection a warm-up runs on, which the pool (or the
// caller) keeps: releasing it does nothing.
type keptConn struct{ *pgx.Conn }

func (keptConn) Release() {}
