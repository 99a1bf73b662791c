package postgres

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/conveyor-dev/conveyor/broker"
)

// commitGroup runs the concurrent calls of one kind of a node in shared
// transactions, as a group commit does: a call that arrives while
// another's transaction runs waits, and the calls that waited run
// together next; a call that arrives alone runs at once. A transaction
// costs the database more than the rows in it (its commit's WAL flush and
// locks: docs/benchmarks.md, the fifteenth pass), so a node whose
// sessions each run one small transaction at a time commits fewer,
// larger ones this way. The CompleteBatch calls share one group
// (complete_merge.go), the Lease calls one per queue (lease_merge.go).
type commitGroup[C failer] struct {
	mu      sync.Mutex
	running bool
	waiting []*groupedCall[C]
}

// groupedCall is a call waiting in a commitGroup. lead is sent true when
// the call is to run the next transaction for the calls waiting, false
// when another ran it and the call's answer is in.
type groupedCall[C failer] struct {
	call C
	lead chan bool
}

// failer is a call of a commitGroup: it holds its answer, or is told its
// error.
type failer interface{ fail(err error) }

// do runs c by apply, in one transaction with the calls that waited with
// it (runShared), and returns once c's answer is in. A call whose ctx
// ends while it waits leaves, failed with ctx's error, unless a
// transaction took it already: then its answer is on its way, and it
// waits for it (what that transaction grants it, the caller must hand
// back).
func (g *commitGroup[C]) do(ctx context.Context, c C, apply func(context.Context, []C) error) {
	me := &groupedCall[C]{call: c, lead: make(chan bool, 1)}
	g.mu.Lock()
	if g.running {
		g.waiting = append(g.waiting, me)
		g.mu.Unlock()
		if !g.await(ctx, me) {
			return
		}
		g.mu.Lock()
	}
	g.running = true
	batch := append([]*groupedCall[C]{me}, g.waiting...)
	g.waiting = nil
	g.mu.Unlock()

	calls := make([]C, len(batch))
	for i, b := range batch {
		calls[i] = b.call
	}
	runShared(ctx, calls, apply)

	g.mu.Lock()
	if len(g.waiting) > 0 {
		next := g.waiting[0]
		g.waiting = g.waiting[1:]
		next.lead <- true // it takes the others with it
	} else {
		g.running = false
	}
	g.mu.Unlock()
	for _, o := range batch[1:] {
		o.lead <- false
	}
}

// await waits for what becomes of me, a waiting call: true when it is to
// lead the next transaction, false when its answer is in (or it left,
// its ctx ended).
func (g *commitGroup[C]) await(ctx context.Context, me *groupedCall[C]) bool {
	select {
	case lead := <-me.lead:
		return lead
	case <-ctx.Done():
	}
	g.mu.Lock()
	i := slices.Index(g.waiting, me)
	if i >= 0 {
		g.waiting = slices.Delete(g.waiting, i, i+1)
	}
	g.mu.Unlock()
	if i < 0 {
		return <-me.lead // taken already, or handed the lead
	}
	me.call.fail(ctx.Err())
	return false
}

// runShared runs calls by apply, which gives each its answer when it
// returns no error. A shared transaction runs without the leader's
// cancellation (it is every call's), and one that fails for another
// reason than the store being out of reach is run again call by call, so
// that what one call asked for wrong fails that call alone.
func runShared[C failer](ctx context.Context, calls []C, apply func(context.Context, []C) error) {
	if len(calls) == 1 {
		if err := apply(ctx, calls); err != nil {
			calls[0].fail(err)
		}
		return
	}
	ctx = context.WithoutCancel(ctx)
	err := apply(ctx, calls)
	switch {
	case err == nil:
	case errors.Is(err, broker.ErrUnavailable):
		for _, c := range calls {
			c.fail(err)
		}
	default:
		for _, c := range calls {
			if err := apply(ctx, []C{c}); err != nil {
				c.fail(err)
			}
		}
	}
}
