package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// workerSet is the workers of a W3 or W4 run: cfg.Workers on r.addr, or
// on each worker node (workerNodes), each of concurrency cfg.Concurrency.
type workerSet struct {
	r       *runner
	ctx     context.Context
	onStart func(seq int)

	mu      sync.Mutex
	workers []*benchWorker
}

// benchWorker is one running worker of a workerSet.
type benchWorker struct {
	node        *node // its first server; nil on r.addr
	addr, label string
	stop        func() error
}

// startWorkers starts the run's workers; onStart is their handler's
// first call.
func (r *runner) startWorkers(ctx context.Context, onStart func(seq int)) (*workerSet, error) {
	ws := &workerSet{r: r, ctx: ctx, onStart: onStart}
	per := r.cfg.Workers
	if len(r.nodes) <= 1 {
		if per > 1 {
			r.res.Settings["workers"] = fmt.Sprintf("%d, each of concurrency %d", per, r.cfg.Concurrency)
		}
		return ws, ws.addEach([]*node{nil}, per)
	}
	nodes := r.workerNodes()
	r.res.Settings["workers"] = fmt.Sprintf("%d, %d per node of %d, each of concurrency %d",
		per*len(nodes), per, len(r.nodes), r.cfg.Concurrency)
	return ws, ws.addEach(nodes, per)
}

// addEach starts per workers on each of nodes (nil: r.addr), each
// labelled apart; on an error it stops those it started.
func (ws *workerSet) addEach(nodes []*node, per int) error {
	for i, n := range nodes {
		for j := range per {
			label := ws.r.label
			switch {
			case len(nodes) > 1 && per > 1:
				label = fmt.Sprintf("%s-w%d.%d", label, i+1, j+1)
			case len(nodes) > 1:
				label = fmt.Sprintf("%s-w%d", label, i+1)
			case per > 1:
				label = fmt.Sprintf("%s-w%d", label, j+1)
			}
			if err := ws.add(n, label); err != nil {
				_ = ws.stop()
				return err
			}
		}
	}
	return nil
}

// add starts a worker whose first server is node n (r.addr when nil),
// labelled label, so that waitSessions tells it from the others.
func (ws *workerSet) add(n *node, label string) error {
	addr := ws.r.addr
	if n != nil {
		addr = ws.r.serversFrom(n)
	}
	stop, err := ws.r.startWorkerAt(ws.ctx, addr, label, ws.onStart)
	if err != nil {
		return err
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.workers = append(ws.workers, &benchWorker{node: n, addr: addr, label: label, stop: stop})
	return nil
}

// waitSessions waits until each worker's first server lists its session.
func (ws *workerSet) waitSessions(ctx context.Context) error {
	ws.mu.Lock()
	workers := append([]*benchWorker(nil), ws.workers...)
	ws.mu.Unlock()
	for _, w := range workers {
		first := ws.r.addr
		if w.node != nil {
			first = w.node.url
		}
		if err := ws.r.waitSessionAt(ctx, first, w.label); err != nil {
			return err
		}
	}
	return nil
}

// on lists the labels of the workers whose first server is node k: those
// whose session a kill of k ends.
func (ws *workerSet) on(k *node) []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var labels []string
	for _, w := range ws.workers {
		if w.node == k {
			labels = append(labels, w.label)
		}
	}
	return labels
}

// stop stops every worker and returns the first error.
func (ws *workerSet) stop() error {
	ws.mu.Lock()
	workers := ws.workers
	ws.workers = nil
	ws.mu.Unlock()
	var errs []error
	for _, w := range workers {
		errs = append(errs, w.stop())
	}
	return errors.Join(errs...)
}

// serversFrom is the address a worker whose first server is node n is
// given: every node's URL, n's first, then the other worker nodes in
// turn, then the rest. The SDK's worker holds its session with the first
// and moves to the next when that session ends, so the workers of a
// killed node spread over the survivors.
func (r *runner) serversFrom(n *node) string {
	wn := r.workerNodes()
	i := slices.Index(wn, n)
	ordered := append(slices.Clone(wn[max(i, 0):]), wn[:max(i, 0)]...)
	for _, o := range r.nodes {
		if !slices.Contains(ordered, o) {
			ordered = append(ordered, o)
		}
	}
	urls := make([]string, len(ordered))
	for j, o := range ordered {
		urls[j] = o.url
	}
	return strings.Join(urls, ",")
}
