package conveyor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
)

// Bounds of one gathered EnqueueBatch: the server's item limit, and a few
// MiB of request so that one batch never holds up the connection (or nears
// the server's 32 MiB request bound) for long.
const (
	batchMaxItems = 1000
	batchMaxBytes = 4 << 20
)

// maxEnqueueLinger bounds how long calls gather after a shared RPC
// returned (see enqueueBatcher).
const maxEnqueueLinger = time.Millisecond

// An enqueueBatcher lets concurrent Client.Enqueue calls share RPCs. While
// fewer than maxInFlight enqueue RPCs are out, a call goes out at once, on
// its own (a plain Enqueue with the caller's context): an idle producer
// waits for nothing. Otherwise the call joins the gathering batch, which
// leaves as one EnqueueBatch as soon as an RPC returns, or at once when it
// is full (batchMaxItems, or batchMaxBytes with the next item). A batch of
// one leaves as a plain Enqueue.
//
// A full batch leaves even when maxInFlight RPCs are out: holding it back
// would add latency and win nothing, since no more calls fit in it. So
// maxInFlight bounds the RPCs of a light load; under a heavy one each RPC
// carries up to batchMaxItems calls.
//
// When a batch of several calls returns, its callers usually come back
// with their next calls a moment later. Sending the gathering batch at
// once would catch only the calls made while the RPC was out, and the
// early and late callers would keep alternating in small batches, each
// paying a round trip and a commit of its own. So the batcher lingers:
// for at most half that RPC's round trip (and maxEnqueueLinger), new calls
// gather until there are as many as the returned batch served, then leave
// together. A call served alone never makes the next ones linger.
//
// Each caller waits for its own outcome. A caller whose context ends while
// its batch is still gathering is taken out of it and its task is never
// sent; once the batch has left, the caller returns its context's error,
// and its task is in doubt, as after a unary call cut short. The batch's
// RPC does not carry any caller's context (it serves them all): it is
// canceled only when every caller in it has given up.
type enqueueBatcher struct {
	tasks       conveyorv1connect.TaskServiceClient
	maxInFlight int

	mu        sync.Mutex
	inFlight  int
	gathering *enqueueBatch // nil when no call waits
	// lingerTarget is, while the batcher lingers, how many gathered calls
	// end the linger (0: not lingering). lingerGen tells a linger's timer
	// whether its linger is still the current one.
	lingerTarget int
	lingerGen    uint64
	// lingerFor is how long to linger after an RPC that took that long;
	// tests replace it.
	lingerFor func(took time.Duration) time.Duration
}

// lingerBound is the default enqueueBatcher.lingerFor: half the round
// trip, at most maxEnqueueLinger.
func lingerBound(took time.Duration) time.Duration { return min(took/2, maxEnqueueLinger) }

// enqueueBatch is the calls of one batch.
type enqueueBatch struct {
	calls []*enqueueCall // in arrival order; some may have left (removed)
	live  int            // calls not removed
	bytes int            // the request bytes of the live calls
	left  bool           // the batch has left: no call is removed any more

	// Set when the batch leaves, for callers that give up afterwards.
	cancel  context.CancelFunc
	waiting int // callers still waiting for the outcome
}

// enqueueCall is one caller waiting in a batch.
type enqueueCall struct {
	ctx     context.Context
	req     *conveyorv1.EnqueueRequest
	size    int
	removed bool
	done    chan struct{} // closed once info or err is set
	info    *TaskInfo
	err     error
}

func (c *enqueueCall) finish(info *TaskInfo, err error) {
	c.info, c.err = info, err
	close(c.done)
}

// enqueue stores one task, sharing an RPC with concurrent calls when one is
// already out.
func (b *enqueueBatcher) enqueue(ctx context.Context, req *conveyorv1.EnqueueRequest) (*TaskInfo, error) {
	if ctx.Err() != nil {
		return nil, ctxError(ctx)
	}
	b.mu.Lock()
	if b.gathering == nil && b.inFlight < b.maxInFlight && b.lingerTarget == 0 {
		b.inFlight++
		b.mu.Unlock()
		info, err := unaryEnqueue(ctx, b.tasks, req)
		b.returned(1, 0)
		return info, err
	}
	call := &enqueueCall{ctx: ctx, req: req, done: make(chan struct{}),
		size: protowire.SizeTag(1) + protowire.SizeBytes(proto.Size(req))}
	if g := b.gathering; g != nil && g.bytes+call.size > batchMaxBytes {
		b.leaveLocked() // full: this call would take it past its bytes
	}
	if b.gathering == nil {
		b.gathering = &enqueueBatch{}
	}
	g := b.gathering
	g.calls = append(g.calls, call)
	g.live++
	g.bytes += call.size
	switch {
	case g.live >= batchMaxItems || g.bytes >= batchMaxBytes:
		b.leaveLocked()
	case b.lingerTarget > 0 && g.live >= b.lingerTarget:
		b.lingerTarget = 0
		if b.inFlight < b.maxInFlight {
			b.leaveLocked()
		}
	}
	b.mu.Unlock()

	select {
	case <-call.done:
		return call.info, call.err
	case <-ctx.Done():
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-call.done: // the outcome came as the context ended: take it
		return call.info, call.err
	default:
	}
	if !g.left {
		call.removed = true
		g.live--
		g.bytes -= call.size
		if g.live == 0 && b.gathering == g {
			b.gathering = nil
		}
		return nil, ctxError(ctx)
	}
	g.waiting--
	if g.waiting == 0 {
		g.cancel() // nobody waits for the outcome any more
	}
	return nil, ctxError(ctx)
}

// returned accounts for an RPC that returned after took, having served
// that many calls, and sends the gathering batch, if any, in its place,
// or lingers first for the served callers to come back.
func (b *enqueueBatcher) returned(served int, took time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inFlight--
	if b.inFlight >= b.maxInFlight {
		return
	}
	wait := b.lingerFor(took)
	if served > 1 && wait > 0 && (b.gathering == nil || b.gathering.live < served) {
		b.lingerLocked(served, wait)
		return
	}
	if b.gathering != nil {
		b.leaveLocked()
	}
}

// lingerLocked lets calls gather until target of them wait or wait has
// passed, whichever comes first. Call with b.mu.
func (b *enqueueBatcher) lingerLocked(target int, wait time.Duration) {
	b.lingerTarget = target
	b.lingerGen++
	gen := b.lingerGen
	time.AfterFunc(wait, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.lingerGen != gen || b.lingerTarget == 0 {
			return // ended by its target, or a newer linger took over
		}
		b.lingerTarget = 0
		if b.gathering != nil && b.inFlight < b.maxInFlight {
			b.leaveLocked()
		}
	})
}

// leaveLocked sends the gathering batch. Call with b.mu.
//
// A caller whose context has ended is taken out here, its task not sent,
// even if it has not woken to take itself out yet: the batch may leave
// while another holds b.mu (an RPC returning, the linger timer, a call
// that fills the batch), and the promise is that such a task is not sent.
// It gets its context's error through its done channel, which its own
// goroutine reads first once it has b.mu.
func (b *enqueueBatcher) leaveLocked() {
	g := b.gathering
	b.gathering = nil
	g.left = true
	calls := make([]*enqueueCall, 0, g.live)
	for _, c := range g.calls {
		switch {
		case c.removed:
		case c.ctx.Err() != nil:
			c.removed = true
			g.live--
			g.bytes -= c.size
			c.finish(nil, ctxError(c.ctx))
		default:
			calls = append(calls, c)
		}
	}
	g.calls = nil
	if len(calls) == 0 {
		return // every caller gave up: nothing to send
	}
	g.waiting = len(calls)
	ctx, cancel := batchContext(calls)
	g.cancel = cancel
	b.inFlight++
	go b.send(ctx, cancel, calls)
}

// batchContext is the context of a batch's RPC: canceled once every
// caller has given up, and with the latest of their deadlines when each
// has one, which the RPC could not outlive anyway. The server learns from
// it how long the call may wait for room in a full queue (a quarter of
// it), so that the callers get their queue's refusal (ErrQueueFull)
// rather than wait on past their deadlines; with a caller that has no
// deadline, the server waits its longest (5 s).
func batchContext(calls []*enqueueCall) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, c := range calls {
		dl, ok := c.ctx.Deadline()
		if !ok {
			return context.WithCancel(context.Background())
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	return context.WithDeadline(context.Background(), latest)
}

// send makes the RPC of one batch and hands each caller its outcome.
func (b *enqueueBatcher) send(ctx context.Context, cancel context.CancelFunc, calls []*enqueueCall) {
	defer cancel()
	if len(calls) == 1 {
		// A batch of one is a plain Enqueue, on its caller's context.
		c := calls[0]
		info, err := unaryEnqueue(c.ctx, b.tasks, c.req)
		b.returned(1, 0)
		c.finish(info, err)
		return
	}
	items := make([]*conveyorv1.EnqueueRequest, len(calls))
	for i, c := range calls {
		items[i] = c.req
	}
	start := time.Now()
	res, err := b.tasks.EnqueueBatch(ctx, connect.NewRequest(&conveyorv1.EnqueueBatchRequest{Items: items, Brief: true}))
	b.returned(len(calls), time.Since(start))
	if err == nil && len(res.Msg.GetResults()) != len(calls) {
		err = fmt.Errorf("conveyor: the server's EnqueueBatch response holds %d results for %d items", len(res.Msg.GetResults()), len(calls))
	}
	if err != nil {
		err = wrapError(err)
		for _, c := range calls {
			c.finish(nil, err)
		}
		return
	}
	var uncoded []*enqueueCall
	for i, r := range res.Msg.GetResults() {
		c := calls[i]
		switch {
		case r.GetError() != "" && r.GetCode() == "":
			uncoded = append(uncoded, c)
		case r.GetError() != "":
			c.finish(nil, itemError(r))
		case r.GetTask() == nil:
			c.finish(nil, errors.New("conveyor: the server's EnqueueBatch result holds neither a task nor an error"))
		default:
			c.finish(newTaskInfo(unbrief(r.GetTask(), c.req)), nil)
		}
	}
	// A server older than per-item codes said why an item failed but not
	// with which code. The item was not stored, so sending it again on its
	// own is safe, and gives its caller the error a unary call would have.
	for _, c := range uncoded {
		c.finish(unaryEnqueue(c.ctx, b.tasks, c.req))
	}
}

// unaryEnqueue is one Enqueue RPC.
func unaryEnqueue(ctx context.Context, tasks conveyorv1connect.TaskServiceClient, req *conveyorv1.EnqueueRequest) (*TaskInfo, error) {
	res, err := tasks.Enqueue(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, wrapError(err)
	}
	if res.Msg.GetTask() == nil {
		return nil, errors.New("conveyor: the server's Enqueue response holds no task")
	}
	return newTaskInfo(res.Msg.GetTask()), nil
}

// ctxError is the error a unary call returns when ctx has ended: an *Error
// of code canceled or deadline_exceeded that wraps ctx.Err().
func ctxError(ctx context.Context) error {
	code := connect.CodeCanceled
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		code = connect.CodeDeadlineExceeded
	}
	return &Error{err: connect.NewError(code, ctx.Err())}
}
