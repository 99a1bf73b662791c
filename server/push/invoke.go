package push

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/lease"
	"github.com/conveyor-dev/conveyor/scheduler"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// Why an invocation's request ended early (its context's cause).
var (
	errTimeout  = errors.New("timeout")
	ErrCanceled = errors.New("canceled by an operator")
	ErrLapsed   = errors.New("the lease lapsed")
	ErrStopping = errors.New("aborted: the server is shutting down")
)

// invocation is one delivery of a task to an endpoint: one POST.
type invocation struct {
	c         *consumer
	lease     broker.Lease
	attemptID string
	sentAt    time.Time
	deadline  time.Time
	limit     time.Duration // deadline - sentAt, for the timeout's message

	// cancel aborts the request (abort); the request's context also ends
	// at the deadline, with errTimeout.
	cancel context.CancelCauseFunc
	base   context.Context
}

func newInvocation(c *consumer, l broker.Lease, s Settings, now time.Time) *invocation {
	deadline := lease.DispatchDeadline(now, now.Add(s.Timeout), l.Task)
	base, cancel := context.WithCancelCause(context.Background())
	return &invocation{c: c, lease: l, attemptID: c.pool.attemptID(l.Token), sentAt: now, deadline: deadline,
		limit: deadline.Sub(now), base: base, cancel: cancel}
}

// abort ends the request with cause; its answer, if one comes, is not read.
func (inv *invocation) abort(cause error) { inv.cancel(cause) }

// run sends the request, classifies its answer and records the attempt.
func (inv *invocation) run(client *http.Client) {
	p := inv.c.pool
	defer inv.cancel(nil)
	ctx, stop := context.WithDeadlineCause(inv.base, inv.deadline, errTimeout)
	defer stop()

	a := inv.send(ctx, client)
	took := p.now().Sub(inv.sentAt)
	p.metrics.PushAnswered(inv.c.queue, a.class, took)
	if a.gone {
		inv.c.markGone()
	}
	inv.record(a)
}

// send posts the PushRequest and classifies what comes back.
func (inv *invocation) send(ctx context.Context, client *http.Client) answer {
	p := inv.c.pool
	env := wire.Envelope(inv.lease.Task)
	env.AttemptId = inv.attemptID
	body, err := protojson.Marshal(&conveyorv1.PushRequest{Task: env, Deadline: timestamppb.New(inv.deadline), AttemptId: inv.attemptID})
	if err != nil {
		return ambiguous(ClassBadResponse, "push: encode the request: "+err.Error())
	}
	inv.c.mu.Lock()
	url := inv.c.settings.URL
	inv.c.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return ambiguous(ClassConnection, "push: "+err.Error())
	}
	now := p.now()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "conveyor/"+p.version)
	req.Header.Set("webhook-id", inv.attemptID)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
	if len(p.keys) > 0 {
		req.Header.Set("webhook-signature", Sign(p.keys, inv.attemptID, now, body))
	}
	resp, err := client.Do(req)
	if err == nil {
		// Closed unread past what classify reads: a longer body is cut off.
		defer func() { _ = resp.Body.Close() }()
	}
	return classify(resp, err, context.Cause(ctx), inv.limit, p.now())
}

// record applies the attempt's outcome: a proven one as a worker's
// Result, an ambiguous one as a failed attempt (with Retry-After
// honoured). A lease lost meanwhile (it lapsed) is not an error: the
// reaper decided.
func (inv *invocation) record(a answer) {
	p := inv.c.pool
	t := inv.lease.Task
	now := p.now()
	at := scheduler.Attempt{SessionID: inv.c.sessionID, Lease: broker.LeaseRef{TaskID: t.ID, Token: inv.lease.Token},
		Retried: t.Retried, MaxRetry: t.MaxRetry, Policy: t.RetryPolicy}
	d := p.retrier.AfterResult(at, a.outcome, a.errMsg, a.result, now)
	if d.Kind == broker.DecideRetry && d.Due.Before(a.retryAfter) {
		d.Due = a.retryAfter
	}
	state, err := p.complete(d)
	// The store down, the answer waits for it (not dropped for an
	// outage), until the pool is stopped for good.
	for outage := time.Duration(0); errors.Is(err, broker.ErrUnavailable) && p.pause(&outage); {
		state, err = p.complete(d)
	}
	switch {
	case err == nil:
		p.metrics.AttemptEnded(t.Queue, t.Type, d.Kind, state, now.Sub(inv.sentAt))
	case errors.Is(err, broker.ErrLeaseLost):
		p.log.Info("dropped a push answer for a lease that was no longer current", "task", t.ID)
	default:
		p.log.Error("record a push answer", "task", t.ID, "err", err)
	}
}

// complete applies an answer's decision as a batch of one: an engine
// that shares the concurrent batches' transactions (PostgreSQL's) then
// records the answers of an endpoint's concurrent invocations, and the
// sessions' Results, in one commit, where a Complete is a transaction of
// its own.
func (p *Pool) complete(d broker.Decision) (broker.State, error) {
	cs, err := p.broker.CompleteBatch(context.Background(), []broker.Decision{d})
	if err != nil {
		return 0, err
	}
	return cs[0].State, cs[0].Err
}
