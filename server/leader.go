package server

import (
	"context"
	"sync"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/scheduler"
)

// leaderGate runs the jobs that must run once across nodes (purges, cron)
// only on the node that leads, for an engine several nodes share: it gates
// their loops on the leadership, and kicks them, and the promoter, at each
// change of it, so that a node that takes over runs them at once. The
// promoter runs on every node: its rounds also wake the node's own
// sessions whose rate bucket refilled, and the engine promotes due tasks
// only on the leader. Each of those jobs is also safe run twice (a
// promotion or a purge finds nothing left to do; a cron fire is refused
// once fired): the gate saves the work, it does not hold a rule.
type leaderGate struct {
	c     broker.Clustered
	loops []*scheduler.Loop // kicked at each change; all but the first gated

	startOnce, stopOnce sync.Once
	stop                chan struct{}
	done                chan struct{}
}

func newLeaderGate(c broker.Clustered, promoter *scheduler.Loop, gated ...*scheduler.Loop) *leaderGate {
	g := &leaderGate{c: c, loops: append([]*scheduler.Loop{promoter}, gated...), stop: make(chan struct{}), done: make(chan struct{})}
	for _, l := range gated {
		l.SetGate(g.leading)
	}
	return g
}

func (g *leaderGate) leading() bool {
	leading, _ := g.c.Leading()
	return leading
}

// Start watches the leadership; it returns at once.
func (g *leaderGate) Start(context.Context) error {
	g.startOnce.Do(func() {
		go g.run()
	})
	return nil
}

func (g *leaderGate) run() {
	defer close(g.done)
	for {
		_, changed := g.c.Leading()
		for _, l := range g.loops {
			l.Kick()
		}
		select {
		case <-changed:
		case <-g.stop:
			return
		}
	}
}

// Stop stops watching; it is idempotent. Start and Stop are called from
// the server's one goroutine of its lifecycle.
func (g *leaderGate) Stop(ctx context.Context) error {
	g.stopOnce.Do(func() { close(g.stop) })
	g.startOnce.Do(func() { close(g.done) }) // never started: nothing to wait for
	select {
	case <-g.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
