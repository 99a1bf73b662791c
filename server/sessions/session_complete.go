package sessions

import (
	"context"
	"errors"
	"sync"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/scheduler"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// completions applies a session's Results to the broker, in batches: one
// goroutine takes every Result that arrived while the last batch was being
// applied and applies them with one CompleteBatch (one commit on an engine
// that commits per call). The receive loop only queues them, so it goes on
// reading (heartbeats, more Results) while a batch commits.
//
// A Result's slot is given back as it arrives, so the next task is leased
// while the Result commits; but the send loop sends it only once the
// Results that freed its slot are recorded (await), so a worker sent its
// next task knows its last outcome is in the store, visible to every
// reader. A Result is applied even if its session ends meanwhile: nothing
// else would release the task. The
// store down, the batch is kept and applied once the store answers: a
// worker's outcome is not dropped for an outage. The goroutine ends once
// the session has ended and its queue is empty; the stream ends after it
// has, so a worker that saw its stream end knows its Results are recorded.
type completions struct {
	s       *session
	mu      sync.Mutex
	pending []answered
	wakeCh  chan struct{}
	done    chan struct{} // closed once run returns

	// queued counts the Results added, recorded those applied (in the
	// same order); recordedCh is closed, and replaced, at each record.
	queued, recorded uint64
	recordedCh       chan struct{}
}

func newCompletions(s *session) *completions {
	return &completions{s: s, wakeCh: make(chan struct{}, 1), done: make(chan struct{}), recordedCh: make(chan struct{})}
}

// fence is what await must wait for to see every Result added so far
// recorded.
func (c *completions) fence() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queued
}

// await waits until the Results added before fence was read are recorded,
// or ctx ends.
func (c *completions) await(ctx context.Context, fence uint64) error {
	for {
		c.mu.Lock()
		done, ch := c.recorded >= fence, c.recordedCh
		c.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// markRecorded notes n more Results applied and wakes await's waiters.
func (c *completions) markRecorded(n int) {
	c.mu.Lock()
	c.recorded += uint64(n)
	close(c.recordedCh)
	c.recordedCh = make(chan struct{})
	c.mu.Unlock()
}

// add queues answered Results.
func (c *completions) add(as []answered) {
	if len(as) == 0 {
		return
	}
	c.mu.Lock()
	c.pending = append(c.pending, as...)
	c.queued += uint64(len(as))
	c.mu.Unlock()
	select {
	case c.wakeCh <- struct{}{}:
	default:
	}
}

func (c *completions) take() []answered {
	c.mu.Lock()
	defer c.mu.Unlock()
	as := c.pending
	c.pending = nil
	return as
}

// run applies the queued Results until the session ended and none is left.
func (c *completions) run() {
	defer close(c.done)
	for {
		select {
		case <-c.wakeCh:
		case <-c.s.ctx.Done():
		}
		// Read before taking: Results are queued before the session is
		// marked ended, so once it is, what take returns is all there is.
		ended := c.s.ctx.Err() != nil
		as := c.take()
		if len(as) > 0 {
			c.apply(as)
			c.markRecorded(len(as))
			continue
		}
		if ended {
			return
		}
	}
}

// apply records a batch of Results: the retry rule decides what each
// attempt leads to, the broker applies the decisions.
func (c *completions) apply(as []answered) {
	s := c.s
	now := s.hub.now()
	ds := make([]broker.Decision, len(as))
	for i, a := range as {
		outcome, errMsg, result := checkedResult(a.r)
		at := scheduler.Attempt{SessionID: s.id, Lease: a.m.ref(), Retried: a.m.retried, MaxRetry: a.m.maxRetry, Policy: a.m.policy}
		ds[i] = s.hub.retrier.AfterResult(at, wire.BrokerOutcome(outcome), errMsg, result, now)
	}
	ctx := context.WithoutCancel(s.ctx)
	res, err := s.hub.broker.CompleteBatch(ctx, ds)
	for outage := (storageOutage{}); errors.Is(err, broker.ErrUnavailable) && outage.wait(s.ctx) == nil; {
		res, err = s.hub.broker.CompleteBatch(ctx, ds)
	}
	if err != nil {
		if s.ctx.Err() == nil {
			s.log.Error("record results", "count", len(ds), "err", err)
		}
		return
	}
	for i, r := range res {
		m := as[i].m
		switch {
		case r.Err == nil:
			s.hub.metrics.AttemptEnded(m.queue, m.typ, ds[i].Kind, r.State, now.Sub(m.sentAt))
		case errors.Is(r.Err, broker.ErrLeaseLost):
			// The reaper took the lease back between this Result's
			// arrival and its application (nothing else takes a running
			// session's lease), so leaseLapsed, finding the member
			// answered, did not count the lapse: it is counted here.
			s.hub.metrics.LeaseLapsed(m.queue, m.typ, 0)
			s.hub.lateResults.Add(1)
			s.log.Info("dropped a result for a lease that was no longer current", "task", m.taskID)
		default:
			s.log.Error("record result", "task", m.taskID, "err", r.Err)
		}
	}
}
