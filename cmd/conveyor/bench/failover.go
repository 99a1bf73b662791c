package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// failoverLiveness is the nodes' --node-liveness in a --kill-leader-after
// run unless the run sets its own: the tasks the killed node's workers held come back to PENDING only
// once its heartbeat is this old, so the server's default (15s) would
// make most of the gap a setting's, not the failover's.
const failoverLiveness = 5 * time.Second

// Failover is what --kill-leader-after measured. Times are from the kill
// unless they say otherwise.
type Failover struct {
	// AfterS is when the leader was killed, from the workers' start.
	AfterS float64 `json:"after_s"`
	// NodeLiveness is the nodes' --node-liveness.
	NodeLiveness string `json:"node_liveness"`
	KilledNode   string `json:"killed_node"`
	NewLeader    string `json:"new_leader"`
	// NewLeaderMs is how long until GetClusterInfo on a survivor named
	// another node leader.
	NewLeaderMs float64 `json:"new_leader_ms"`
	// MaxGapMs is the longest interval with no handler started on any
	// worker around the kill: from the last start before it to the last
	// start within gapWindow liveness after it (when the tasks the killed
	// node held are back and a new leader sweeps); MaxGapAtMs is where it
	// began (negative: before the kill).
	MaxGapMs   float64 `json:"max_gap_ms"`
	MaxGapAtMs float64 `json:"max_gap_at_ms"`
	// Redelivered counts the tasks handed to a handler a second time after
	// the kill: those the killed node's workers held, back after
	// NodeLiveness (and, in SOAK, a task the killed node committed whose
	// enqueue the bench sent again to a survivor); RedeliveredAfterMs is
	// when the first of them started again.
	Redelivered        int64   `json:"redelivered"`
	RedeliveredAfterMs float64 `json:"redelivered_after_ms,omitempty"`
	// WorkersOnKilled is how many workers held their session with the
	// killed node; WorkersBackMs is how long until a survivor listed each
	// of them again (WorkerFailover says how they got there).
	WorkersOnKilled int     `json:"workers_on_killed_node"`
	WorkersBackMs   float64 `json:"workers_back_ms"`
	WorkerFailover  string  `json:"worker_failover"`
}

// workerFailover is how the workers of the killed node reach another.
const workerFailover = "each worker is given every node's URL, its own node's first: the Go SDK opens its next session with the next one"

// failoverWatch records the handler starts of a --kill-leader-after run.
type failoverWatch struct {
	starts []int64 // mono, in the order the starts were counted
	next   atomic.Int64
	seen   []atomic.Bool // by seq: started once
	again  atomic.Int64
	// firstAgain is the first repeated start after the kill (mono).
	firstAgain atomic.Int64
	killAt     atomic.Int64
	liveness   time.Duration
	res        Failover
}

// newFailoverWatch makes room for n tasks started once and slack more
// starts (the redeliveries).
func newFailoverWatch(n, slack int, liveness time.Duration) *failoverWatch {
	return &failoverWatch{starts: make([]int64, n+slack), seen: make([]atomic.Bool, n), liveness: liveness,
		res: Failover{NodeLiveness: liveness.String(), WorkerFailover: workerFailover}}
}

// handled records a handler's start of task seq (-1: a task the run does
// not expect once only).
func (f *failoverWatch) handled(seq int) {
	now := mono()
	if i := f.next.Add(1) - 1; i < int64(len(f.starts)) {
		atomic.StoreInt64(&f.starts[i], now)
	}
	if seq >= 0 && seq < len(f.seen) && f.seen[seq].Swap(true) {
		f.again.Add(1)
		if k := f.killAt.Load(); k > 0 && now > k {
			f.firstAgain.CompareAndSwap(0, now)
		}
	}
}

// onHandled is the handler start of W3's workers: counted, and watched in
// a failover run.
func (r *runner) onHandled(seq int) {
	r.handled.Add(1)
	if f := r.failover; f != nil {
		f.handled(seq)
	}
}

// result is the failover's figures once the run ended.
func (f *failoverWatch) result() *Failover {
	res := f.res
	kill := f.killAt.Load()
	if kill == 0 {
		return &res
	}
	n := min(f.next.Load(), int64(len(f.starts)))
	starts := make([]int64, n)
	for i := range starts {
		starts[i] = atomic.LoadInt64(&f.starts[i])
	}
	slices.Sort(starts)
	gap, at := maxGapAround(starts, kill, kill+int64(gapWindow*f.liveness))
	res.MaxGapMs, res.MaxGapAtMs = float64(gap)/1e6, float64(at-kill)/1e6
	res.Redelivered = f.again.Load()
	if a := f.firstAgain.Load(); a > 0 {
		res.RedeliveredAfterMs = float64(a-kill) / 1e6
	}
	return &res
}

// gapWindow is how many node liveness times after the kill the gap is
// looked for: one for the peers to declare the node dead, one more for the
// new leader's sweep and the released tasks' dispatch. Later quiet times
// are the run's (SOAK's scheduled tasks, its drain), not the failover's.
const gapWindow = 2

// maxGapAround is the longest interval between consecutive sorted starts
// from the last one before kill (kill itself when none came before) to
// the last one before until, and where it began.
func maxGapAround(sorted []int64, kill, until int64) (gap, at int64) {
	i, _ := slices.BinarySearch(sorted, kill)
	prev := kill
	if i > 0 {
		prev = sorted[i-1]
	}
	at = prev
	for _, s := range sorted[i:] {
		if s >= until {
			break
		}
		if s-prev > gap {
			gap, at = s-prev, prev
		}
		prev = s
	}
	return gap, at
}

// killLeaderLater kills the leader cfg.KillLeaderAfter from now, unless
// ended closes first (the run is over: an error, since it measured no
// failover); on lists the labels of the workers whose session was with a
// node. The channel gets the outcome.
func (r *runner) killLeaderLater(ctx context.Context, ended <-chan struct{}, on func(*node) []string) <-chan error {
	out := make(chan error, 1)
	t0 := time.Now()
	go func() {
		t := time.NewTimer(r.cfg.KillLeaderAfter)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ended:
			out <- fmt.Errorf("the run ended before --kill-leader-after %s: give it more tasks or a longer --duration",
				r.cfg.KillLeaderAfter)
			return
		case <-ctx.Done():
			out <- ctx.Err()
			return
		}
		r.failover.res.AfterS = time.Since(t0).Seconds()
		out <- r.killLeader(ctx, on)
	}()
	return out
}

// killLeader SIGKILLs the node GetClusterInfo names leader, and waits
// until a survivor names a new leader and lists each worker that held its
// session with the killed node.
func (r *runner) killLeader(ctx context.Context, on func(*node) []string) error {
	f := r.failover
	leader, err := r.leader(ctx, nil)
	if err != nil {
		return fmt.Errorf("find the leader to kill: %w", err)
	}
	leader.peakKB.Store(procStatusKB(leader.proc.pid(), "VmHWM"))
	leader.killed.Store(true)
	kill := mono()
	f.killAt.Store(kill)
	if err := leader.proc.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("kill the leader: %w", err)
	}
	f.res.KilledNode = strings.TrimPrefix(leader.url, "http://")
	labels := on(leader)
	f.res.WorkersOnKilled = len(labels)
	back := make(chan error, 1)
	go func() {
		err := r.waitWorkersBack(ctx, labels)
		f.res.WorkersBackMs = float64(mono()-kill) / 1e6
		back <- err
	}()
	next, err := r.leader(ctx, leader)
	if err != nil {
		return errors.Join(fmt.Errorf("no new leader after the kill: %w", err), <-back)
	}
	f.res.NewLeaderMs = float64(mono()-kill) / 1e6
	f.res.NewLeader = strings.TrimPrefix(next.url, "http://")
	return <-back
}

// waitWorkersBack waits until the live nodes list a session of each
// worker labelled in labels.
func (r *runner) waitWorkersBack(ctx context.Context, labels []string) error {
	for {
		seen := map[string]bool{}
		for _, n := range r.nodes {
			if n.killed.Load() {
				continue
			}
			res, err := adminAt(n.url, r.cfg.Token).ListWorkers(ctx, connect.NewRequest(&conveyorv1.ListWorkersRequest{}))
			if err != nil {
				continue
			}
			for _, w := range res.Msg.GetWorkers() {
				seen[w.GetLabels()[runLabelKey]] = true
			}
		}
		if !slices.ContainsFunc(labels, func(l string) bool { return !seen[l] }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the killed node's workers are not back on a survivor: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// leader waits until GetClusterInfo on a live node names one of the run's
// nodes other than not leader, and returns it.
func (r *runner) leader(ctx context.Context, not *node) (*node, error) {
	for {
		info, err := r.admin().GetClusterInfo(ctx, connect.NewRequest(&conveyorv1.GetClusterInfoRequest{}))
		if err == nil {
			for _, ni := range info.Msg.GetNodes() {
				if !ni.GetLeader() {
					continue
				}
				for _, n := range r.nodes {
					if n != not && n.url == "http://"+ni.GetAddress() {
						return n, nil
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}
