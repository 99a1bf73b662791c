package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// workerSet is the workers of a W3 or W4 run: one on r.addr, or one per
// worker node (workerNodes), each of concurrency cfg.Concurrency.
type workerSet struct {
	r       *runner
	ctx     context.Context
	onStart func(seq int)

	mu      sync.Mutex
	workers []*benchWorker
	// stopping are the workers moved off a killed node, stopped in the
	// background: their Run ends once their reconnect wait sees the stop.
	stopping []func() error
	started  int
}

// benchWorker is one running worker of a workerSet.
type benchWorker struct {
	node        *node // nil on r.addr
	addr, label string
	stop        func() error
}

// startWorkers starts the run's workers; onStart is their handler's
// first call.
func (r *runner) startWorkers(ctx context.Context, onStart func(seq int)) (*workerSet, error) {
	ws := &workerSet{r: r, ctx: ctx, onStart: onStart}
	if len(r.nodes) <= 1 {
		return ws, ws.add(nil, r.addr, r.label)
	}
	nodes := r.workerNodes()
	r.res.Settings["workers"] = fmt.Sprintf("%d, one per node of %d, each of concurrency %d",
		len(nodes), len(r.nodes), r.cfg.Concurrency)
	for _, n := range nodes {
		if err := ws.add(n, n.url, ""); err != nil {
			_ = ws.stop()
			return nil, err
		}
	}
	return ws, nil
}

// add starts a worker on addr (node n's, or r.addr when n is nil); an
// empty label gets one of its own, so that waitSessions tells it from
// the others.
func (ws *workerSet) add(n *node, addr, label string) error {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.started++
	if label == "" {
		label = fmt.Sprintf("%s-w%d", ws.r.label, ws.started)
	}
	stop, err := ws.r.startWorkerAt(ws.ctx, addr, label, ws.onStart)
	if err != nil {
		return err
	}
	ws.workers = append(ws.workers, &benchWorker{node: n, addr: addr, label: label, stop: stop})
	return nil
}

// waitSessions waits until each worker's server lists its session.
func (ws *workerSet) waitSessions(ctx context.Context) error {
	ws.mu.Lock()
	workers := append([]*benchWorker(nil), ws.workers...)
	ws.mu.Unlock()
	for _, w := range workers {
		if err := ws.r.waitSessionAt(ctx, w.addr, w.label); err != nil {
			return err
		}
	}
	return nil
}

// move restarts the workers of the killed node on the live worker nodes
// in turn (any live node when no worker node is left), and returns how
// many it moved. The SDK worker reconnects only to the address it was
// given, so the bench moves it, as an application with a list of servers
// would.
func (ws *workerSet) move(killed *node) (int, error) {
	ws.mu.Lock()
	var keep, moved []*benchWorker
	for _, w := range ws.workers {
		if w.node == killed {
			moved = append(moved, w)
			ws.stopping = append(ws.stopping, w.stop)
			go func() { _ = w.stop() }() // the worker is between sessions: it ends promptly
		} else {
			keep = append(keep, w)
		}
	}
	ws.workers = keep
	ws.mu.Unlock()
	live := ws.r.liveWorkerNodes()
	for i := range moved {
		n := live[i%len(live)]
		if err := ws.add(n, n.url, ""); err != nil {
			return i, fmt.Errorf("restart a worker on %s: %w", n.url, err)
		}
	}
	return len(moved), nil
}

// stop stops every worker and returns the first error.
func (ws *workerSet) stop() error {
	ws.mu.Lock()
	workers, stopping := ws.workers, ws.stopping
	ws.workers, ws.stopping = nil, nil
	ws.mu.Unlock()
	var errs []error
	for _, w := range workers {
		errs = append(errs, w.stop())
	}
	for _, stop := range stopping {
		_ = stop() // it ran already: this waits for its Run to return
	}
	return errors.Join(errs...)
}

// liveWorkerNodes are the worker nodes not killed, or every live node
// when none is left of them.
func (r *runner) liveWorkerNodes() []*node {
	var live []*node
	for _, n := range r.workerNodes() {
		if !n.killed.Load() {
			live = append(live, n)
		}
	}
	if len(live) == 0 {
		for _, n := range r.nodes {
			if !n.killed.Load() {
				live = append(live, n)
			}
		}
	}
	return live
}
