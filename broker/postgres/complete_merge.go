package postgres

import (
	"context"

	"github.com/conveyor-dev/conveyor/broker"
)

// resultCall is one CompleteBatch call: its decisions, then its answer.
type resultCall struct {
	ds  []broker.Decision
	out []broker.Completion
	err error
}

// CompleteBatch applies decisions about leased tasks in one transaction,
// shared with the calls of the node's other sessions that arrived while
// the last one ran (groupcommit.go); see broker.Broker. Each session
// applies its Results one batch at a time, so with several workers on a
// queue the node would otherwise commit as many small transactions at
// once as it has sessions. A call that waits for another's transaction is
// not cut short by its ctx (a session passes one without cancellation),
// and a shared transaction runs without the leader's cancellation.
func (e *Engine) CompleteBatch(ctx context.Context, ds []broker.Decision) ([]broker.Completion, error) {
	c := &resultCall{ds: ds}
	e.results.do(ctx, c, e.applyMerged)
	return c.out, c.err
}

func (c *resultCall) fail(err error) { c.out, c.err = nil, err }

// applyMerged applies calls' decisions in one transaction and gives each
// call its part of the answer.
func (e *Engine) applyMerged(ctx context.Context, calls []*resultCall) error {
	var all []broker.Decision
	for _, c := range calls {
		all = append(all, c.ds...)
	}
	out, err := e.completeBatch(ctx, all)
	if err != nil {
		return err
	}
	for _, c := range calls {
		c.out, out = out[:len(c.ds):len(c.ds)], out[len(c.ds):]
	}
	return nil
}
