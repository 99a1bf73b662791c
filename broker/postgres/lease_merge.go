package postgres

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// leaseCall is one Lease call: its parameters, then its answer.
type leaseCall struct {
	p   broker.LeaseParams
	out []broker.Lease
	err error
}

func (c *leaseCall) fail(err error) { c.out, c.err = nil, err }

// Lease leases ready tasks to a session; see broker.Broker. The node's
// concurrent Lease calls that take from one queue first share a
// transaction (groupcommit.go, leaseGroups), and the picks of its calls
// that take from one queue by one route share its statements: one
// walk of the ready line for them all, whose rows are dealt out to the
// calls in turn (pickGroup). Each session leases for its own free slots,
// so without this a queue served by several workers of a node would take
// as many small transactions at once as it has workers, and drain slower
// than one served by a single worker of the same concurrency
// (docs/benchmarks.md, the fifteenth and sixteenth passes).
func (e *Engine) Lease(ctx context.Context, p broker.LeaseParams) ([]broker.Lease, error) {
	c := &leaseCall{p: p}
	key := ""
	if len(p.Picks) > 0 {
		key = p.Picks[0].Queue
	}
	g := e.leases.acquire(key)
	g.do(ctx, c, e.leaseCalls)
	e.leases.release(key, g)
	if len(c.out) == 0 {
		return nil, c.err // a failed call has no leases
	}
	return c.out, nil
}

// leaseGroups holds a commitGroup for each queue the node's Lease calls
// take from first: the calls of one queue share transactions, and those
// of other queues run beside them, so that a node whose sessions serve
// many queues leases on as many connections at once as before. A group
// lives while a call uses it.
type leaseGroups struct {
	mu sync.Mutex
	m  map[string]*leaseGroup
}

// leaseGroup is the commitGroup of one queue's Lease calls, and how many
// calls use it.
type leaseGroup struct {
	commitGroup[*leaseCall]
	users int
}

// acquire returns the group of the calls whose first pick is of queue
// key, for a call to use until release.
func (l *leaseGroups) acquire(key string) *leaseGroup {
	l.mu.Lock()
	defer l.mu.Unlock()
	g := l.m[key]
	if g == nil {
		if l.m == nil {
			l.m = map[string]*leaseGroup{}
		}
		g = &leaseGroup{}
		l.m[key] = g
	}
	g.users++
	return g
}

// release ends a call's use of group g of queue key, dropping the group
// when no call uses it.
func (l *leaseGroups) release(key string, g *leaseGroup) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g.users--; g.users == 0 {
		delete(l.m, key)
	}
}

// pickGroup is the picks of one transaction's Lease calls that share one
// walk: of one queue, by one route, with the same grace and push. A queue
// with caps is walked for one call at a time (each call's share is
// decided by the caps, in turn), so its groups hold one pick.
type pickGroup struct {
	queue string
	walk  routeWalk
	grace time.Duration
	push  bool
	// alone: the queue has caps, and the group holds one pick.
	alone bool
	// takers are the calls' picks, in the order they were made.
	takers []*taker
	// short: the walk is owed a look (recheckLater).
	short bool
}

// taker is one call's pick in a pickGroup.
type taker struct {
	call, pick int // the call's index in the transaction, the pick's in the call
	p          *broker.LeaseParams
	want       int
	// reserved is what the queue's hints let the call take, and allowed
	// what its caps let it (at at); got is what it took.
	reserved, allowed int
	at                time.Time
	got               []broker.Lease
}

// leaseCalls leases what calls ask for in one transaction and gives each
// call its leases, in the order of its picks.
func (e *Engine) leaseCalls(ctx context.Context, calls []*leaseCall) error {
	e.lapses.RLock()
	defer e.lapses.RUnlock()
	var groups []*pickGroup
	err := e.inTx(ctx, func(t *txn) (err error) {
		groups, err = t.leaseFor(ctx, calls)
		return err
	})
	e.leased(calls, groups, err)
	return err
}

// leaseFor leases what calls ask for in t, and returns the groups their
// picks were walked in, for leased.
func (t *txn) leaseFor(ctx context.Context, calls []*leaseCall) ([]*pickGroup, error) {
	if err := t.lockCaps(ctx, t.e.cappedCalls(calls)); err != nil {
		return nil, err
	}
	node := t.e.NodeID()
	groups := t.e.groupPicks(t, calls)
	for _, g := range groups {
		if err := t.leasePick(ctx, g, node); err != nil {
			return groups, err
		}
	}
	return groups, nil
}

// leased gives calls their leases once the transaction that ran leaseFor
// ended (err: it failed, and they have none), and arms the looks its
// short walks are owed.
func (e *Engine) leased(calls []*leaseCall, groups []*pickGroup, err error) {
	for _, g := range groups {
		if g.short {
			e.recheckLater(g.queue)
		}
	}
	if err != nil {
		return
	}
	parts := make([][][]broker.Lease, len(calls))
	for i, c := range calls {
		parts[i] = make([][]broker.Lease, len(c.p.Picks))
	}
	for _, g := range groups {
		for _, tk := range g.takers {
			parts[tk.call][tk.pick] = tk.got
		}
	}
	for i, c := range calls {
		c.out = slices.Concat(parts[i]...)
	}
}

// cappedCalls lists the capped queues calls may lease from, for lockCaps
// (which locks them in one order, so that two transactions naming the
// same queues never wait for each other crosswise).
func (e *Engine) cappedCalls(calls []*leaseCall) []string {
	var out []string
	for _, c := range calls {
		out = append(out, e.cappedPicks(c.p.Picks, c.p.Now)...)
	}
	return out
}

// groupPicks groups calls' picks by the walk they share, in the order the
// calls made them. A pick of a queue with caps (locked in t, or capped in
// the memory) has a group of its own.
func (e *Engine) groupPicks(t *txn, calls []*leaseCall) []*pickGroup {
	var groups []*pickGroup
	for i, c := range calls {
		w := walkOf(c.p.Route)
		for j, pick := range c.p.Picks {
			if pick.N <= 0 {
				continue
			}
			tk := &taker{call: i, pick: j, p: &c.p, want: pick.N}
			alone := t.caps[pick.Queue] != nil || e.queueCapped(pick.Queue)
			k := -1
			if !alone {
				k = slices.IndexFunc(groups, func(g *pickGroup) bool {
					return !g.alone && g.queue == pick.Queue && g.grace == c.p.LimitGrace && g.push == c.p.Push && g.walk.same(w)
				})
			}
			if k < 0 {
				groups = append(groups, &pickGroup{queue: pick.Queue, walk: w, grace: c.p.LimitGrace, push: c.p.Push, alone: alone})
				k = len(groups) - 1
			}
			groups[k].takers = append(groups[k].takers, tk)
		}
	}
	return groups
}

// same reports whether w and o read the same tasks the same way.
func (w routeWalk) same(o routeWalk) bool {
	return w.kind == o.kind && w.atMostOnce == o.atMostOnce && slices.Equal(w.types, o.types) && slices.Equal(w.except, o.except)
}
