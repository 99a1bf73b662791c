package bench

import (
	"context"
	"fmt"
	"strings"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// requireIdleQueue refuses to run a workload whose workers drain the bench
// queue (W3, W4, SOAK) against a running server (--addr) while that queue
// holds unfinished tasks, such as an earlier W1 or W2 run leaves behind:
// the workers would drain them with the run's own tasks and the figure
// would count only the run's own. A fresh server per run has none.
func (r *runner) requireIdleQueue(ctx context.Context) error {
	if r.cfg.Addr == "" {
		return nil
	}
	q, err := r.queueInfo(ctx, benchQueue)
	if err != nil {
		return err
	}
	if held := unfinished(q); held != "" {
		return fmt.Errorf("queue %q of %s holds unfinished tasks (%s), which %s would drain and not count: "+
			"delete them first (conveyor task delete --addr %s --queue %s --state STATE) or run without --addr",
			benchQueue, r.addr, held, r.cfg.Workload, r.addr, benchQueue)
	}
	return nil
}

// queueInfo reads queue name's counts; a queue the server does not list
// holds nothing, and reads as empty.
func (r *runner) queueInfo(ctx context.Context, name string) (*conveyorv1.QueueInfo, error) {
	res, err := r.admin().ListQueues(ctx, connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
	if err != nil {
		return nil, fmt.Errorf("read the queues of %s: %w", r.addr, err)
	}
	for _, q := range res.Msg.GetQueues() {
		if q.GetName() == name {
			return q, nil
		}
	}
	return &conveyorv1.QueueInfo{Name: name}, nil
}

// unfinished lists q's counts of tasks not yet in a final state, or "".
func unfinished(q *conveyorv1.QueueInfo) string {
	var held []string
	for _, c := range []struct {
		state string
		n     int64
	}{{"pending", q.GetPending()}, {"active", q.GetActive()}, {"retry", q.GetRetry()},
		{"scheduled", q.GetScheduled()}, {"aggregating", q.GetAggregating()}, {"blocked", q.GetBlocked()}} {
		if c.n > 0 {
			held = append(held, fmt.Sprintf("%d %s", c.n, c.state))
		}
	}
	return strings.Join(held, ", ")
}
