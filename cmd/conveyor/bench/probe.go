package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// probeQueue is the queue prefix of the probes waitCrossDispatch sends:
// queue probeQueue+"<j>" is served by a worker on node j alone.
const probeQueue = "bench-probe-"

// probeRound is how long one round of probes may take to be dispatched:
// far above a prompt cross-node dispatch (milliseconds), far below what a
// node that does not yet know its peers takes (it reads their tasks at
// its next resync, seconds later).
const probeRound = time.Second

// probeRounds bounds the rounds, about a minute of them.
const probeRounds = 60

// waitCrossDispatch waits until a task enqueued on any node is dispatched
// promptly to a worker on any other: until the nodes know each other, a
// task enqueued on one waits for another's next resync, and the load would
// measure that start, not the cluster. It records how long the wait took.
func (r *runner) waitCrossDispatch(ctx context.Context) error {
	t0 := time.Now()
	type pair struct{ round, from, to int }
	got := make(chan pair, 64)
	var stops []func() error
	defer func() {
		for _, stop := range stops {
			_ = stop()
		}
	}()
	for j, n := range r.nodes {
		stop, err := r.startProbeWorker(ctx, n.url, j, func(p []byte) {
			var round, from int
			if _, err := fmt.Sscanf(string(p), "%d %d", &round, &from); err == nil {
				select {
				case got <- pair{round, from, j}:
				default:
				}
			}
		})
		if err != nil {
			return err
		}
		stops = append(stops, stop)
	}
	for round := range probeRounds {
		want := 0
		for i, from := range r.nodes {
			for j := range r.nodes {
				if i == j {
					continue
				}
				if _, err := from.client.Enqueue(ctx, benchType, fmt.Appendf(nil, "%d %d", round, i),
					conveyor.Queue(fmt.Sprintf("%s%d", probeQueue, j))); err != nil {
					return fmt.Errorf("probe node %d from node %d: %w", j+1, i+1, err)
				}
				want++
			}
		}
		timeout := time.After(probeRound)
		for want > 0 {
			select {
			case p := <-got:
				if p.round == round {
					want--
				}
			case <-timeout:
				want = -1
			case <-ctx.Done():
				return fmt.Errorf("wait for the nodes to pass tasks to each other: %w", ctx.Err())
			}
		}
		if want == 0 {
			r.res.Settings["cross_dispatch_ready_s"] = fmt.Sprintf("%.1f", time.Since(t0).Seconds())
			return nil
		}
	}
	return errors.New("the nodes do not pass tasks to each other within " + probeRound.String() +
		" after a minute: a task enqueued on one waits for another's resync")
}

// startProbeWorker runs a worker of probe queue j on addr.
func (r *runner) startProbeWorker(ctx context.Context, addr string, j int, onTask func([]byte)) (func() error, error) {
	opts := []conveyor.WorkerOption{conveyor.WithQueue(fmt.Sprintf("%s%d", probeQueue, j), 1), conveyor.WithConcurrency(4)}
	if r.cfg.Token != "" {
		opts = append(opts, conveyor.WithToken(r.cfg.Token))
	}
	w, err := conveyor.NewWorker(addr, opts...)
	if err != nil {
		return nil, err
	}
	w.HandleFunc(benchType, func(_ context.Context, d *conveyor.Delivery) error {
		onTask(d.Payload)
		return nil
	})
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	return func() error { cancel(); return <-done }, nil
}
