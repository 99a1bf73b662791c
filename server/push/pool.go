package push

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/scheduler"
)

// Metrics records what the endpoints see happen, for the server's
// /metrics. It must be safe for concurrent use and must not call the
// broker.
type Metrics interface {
	// TaskDispatched counts one delivery of t, sent at now.
	TaskDispatched(t *broker.Task, now time.Time)
	// AttemptEnded counts what an answer led to, as for a session's Result.
	AttemptEnded(queue, typ string, kind broker.DecisionKind, to broker.State, ran time.Duration)
	// PushAnswered counts one invocation of queue's endpoint by the class
	// of its answer, and how long it took.
	PushAnswered(queue, class string, took time.Duration)
}

// Config is what a Pool needs from the server.
type Config struct {
	Broker  broker.Broker
	Retrier scheduler.Retrier
	Metrics Metrics
	Log     *slog.Logger
	Now     func() time.Time
	// AttemptID names the delivery of a lease token (the session hub's, so
	// that attempt ids are alike whichever way a task goes).
	AttemptID func(token uint64) string
	// Keys sign the requests (none: unsigned, loopback URLs only).
	Keys [][]byte
	// LimitGrace is the lease's grace past an attempt's bound.
	LimitGrace time.Duration
	// Version goes in the User-Agent.
	Version string
	// Leading, for an engine several nodes share, reports whether this
	// node leads (only the leader pushes, so that an endpoint's
	// concurrency holds across nodes) and a channel closed at the next
	// change. Nil: always leading.
	Leading func() (bool, <-chan struct{})
	// Refresh, for an engine several nodes share, is how often the
	// endpoints are read again, to learn of changes made through another
	// node (0: only when Refresh is called).
	RefreshEvery time.Duration
}

// Pool keeps one consumer per queue with a push endpoint. Its methods are
// safe for concurrent use.
type Pool struct {
	broker     broker.Broker
	retrier    scheduler.Retrier
	metrics    Metrics
	log        *slog.Logger
	now        func() time.Time
	attemptID  func(uint64) string
	keys       [][]byte
	limitGrace time.Duration
	version    string
	leadingFn  func() (bool, <-chan struct{})
	every      time.Duration

	// life ends when the pool is stopped for good: consumers' loops, and
	// invocations waiting for the store to record their answer.
	life     context.Context
	kill     context.CancelFunc
	refreshC chan struct{}
	done     chan struct{}

	mu        sync.Mutex
	consumers map[string]*consumer
	started   bool
	stopped   bool
}

// NewPool returns a pool with no endpoint; Start reads them.
func NewPool(cfg Config) *Pool {
	life, kill := context.WithCancel(context.Background())
	return &Pool{broker: cfg.Broker, retrier: cfg.Retrier, metrics: cfg.Metrics, log: cfg.Log.With("component", "push"),
		now: cfg.Now, attemptID: cfg.AttemptID, keys: cfg.Keys, limitGrace: cfg.LimitGrace, version: cfg.Version,
		leadingFn: cfg.Leading, every: cfg.RefreshEvery, life: life, kill: kill, refreshC: make(chan struct{}, 1),
		done: make(chan struct{}), consumers: map[string]*consumer{}}
}

// Pushing reports whether this node invokes the endpoints now: always on
// an engine of one node, only while it leads on one several share (the
// consumers of the others stand idle).
func (p *Pool) Pushing() bool { return p.leading() }

func (p *Pool) leading() bool {
	if p.leadingFn == nil {
		return true
	}
	l, _ := p.leadingFn()
	return l
}

// pause waits the next of doubling delays (from 100 ms to 2 s) while the
// store is down; it reports false, at once, once the pool is stopped.
func (p *Pool) pause(d *time.Duration) bool {
	*d = min(max(2**d, 100*time.Millisecond), 2*time.Second)
	t := time.NewTimer(*d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-p.life.Done():
		return false
	}
}

// Start reads the queues' endpoints and starts their consumers, then keeps
// them in step with the configuration (Refresh) and the leadership.
func (p *Pool) Start(ctx context.Context) error {
	p.mu.Lock()
	p.started = true
	p.mu.Unlock()
	if err := p.reconcile(ctx); err != nil {
		p.log.Error("read the push endpoints", "err", err)
	}
	go p.watch()
	return nil
}

// Refresh reads the queues' endpoints again (after a change of a queue's
// configuration); it returns at once.
func (p *Pool) Refresh() {
	select {
	case p.refreshC <- struct{}{}:
	default:
	}
}

// watch reconciles on Refresh, on a timer for other nodes' changes, and
// wakes every consumer at a change of leadership.
func (p *Pool) watch() {
	defer close(p.done)
	var tick <-chan time.Time
	if p.every > 0 {
		t := time.NewTicker(p.every)
		defer t.Stop()
		tick = t.C
	}
	for {
		var changed <-chan struct{}
		if p.leadingFn != nil {
			_, changed = p.leadingFn()
		}
		select {
		case <-p.life.Done():
			return
		case <-p.refreshC:
		case <-tick:
		case <-changed:
			p.wakeAll()
			continue
		}
		if err := p.reconcile(p.life); err != nil && p.life.Err() == nil {
			p.log.Error("read the push endpoints", "err", err)
		}
	}
}

// reconcile starts, reconfigures and stops consumers to match the queues'
// stored endpoints. An endpoint the server may not push to (a non-loopback
// URL with no secret configured now) is left unserved, and logged.
func (p *Pool) reconcile(ctx context.Context) error {
	qs, err := p.broker.Queues(ctx)
	if err != nil {
		return err
	}
	want := map[string]Settings{}
	for _, q := range qs {
		if q.Config.Push.URL == "" {
			continue
		}
		if err := Check("push", q.Config.Push, len(p.keys) == 0); err != nil {
			p.log.Warn("not pushing to the endpoint of queue", "queue", q.Name, "err", err)
			continue
		}
		want[q.Name] = SettingsOf(q.Config.Push)
	}
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil
	}
	var gone []*consumer
	for name, c := range p.consumers {
		if _, ok := want[name]; !ok {
			gone = append(gone, c)
			delete(p.consumers, name)
		}
	}
	for name, s := range want {
		if c := p.consumers[name]; c != nil {
			c.configure(s)
			continue
		}
		c := newConsumer(p, name, s)
		p.consumers[name] = c
		go c.run(p.life)
		c.wake()
	}
	p.mu.Unlock()
	for _, c := range gone {
		// An endpoint removed: its invocations in flight finish.
		go c.stop(p.life, ErrStopping)
	}
	return nil
}

func (p *Pool) wakeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.consumers {
		c.wake()
	}
}

// consumerOf is the consumer leasing under sessionID, if it is one of ours.
func (p *Pool) consumerOf(sessionID string) *consumer {
	queue, ok := strings.CutPrefix(sessionID, "push:")
	if !ok {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.consumers[queue]
}

// TasksReady wakes queue's endpoint, if it has one (the broker's signal).
func (p *Pool) TasksReady(queue string) {
	p.mu.Lock()
	c := p.consumers[queue]
	p.mu.Unlock()
	if c != nil {
		c.wake()
	}
}

// LeaseLapsed aborts the invocation whose lease the reaper took back (it
// runs under the broker's lock: it takes only the pool's and the
// consumer's locks).
func (p *Pool) LeaseLapsed(l broker.LapsedLease) {
	if c := p.consumerOf(l.SessionID); c != nil {
		c.abort(l.Lease, ErrLapsed)
	}
}

// RunningCanceled aborts the invocation of a task an operator canceled;
// its attempt is then recorded, and the cancel's rule decides.
func (p *Pool) RunningCanceled(l broker.LapsedLease) {
	if c := p.consumerOf(l.SessionID); c != nil {
		c.abort(l.Lease, ErrCanceled)
	}
}

// List describes the endpoints, by queue.
func (p *Pool) List() []Info {
	p.mu.Lock()
	cs := make([]*consumer, 0, len(p.consumers))
	for _, c := range p.consumers {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	out := make([]Info, len(cs))
	for i, c := range cs {
		out[i] = c.info()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out
}

// Stop stops leasing, waits for the invocations in flight until ctx ends,
// then aborts the rest (each records its attempt as failed, since the
// endpoint may have run it). It is idempotent.
func (p *Pool) Stop(ctx context.Context) error {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		return nil
	}
	p.stopped = true
	started := p.started
	cs := make([]*consumer, 0, len(p.consumers))
	for _, c := range p.consumers {
		cs = append(cs, c)
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.stop(ctx, ErrStopping)
		}()
	}
	// Past ctx, answers still waiting for the store give up.
	stopKill := context.AfterFunc(ctx, p.kill)
	wg.Wait()
	stopKill()
	p.kill()
	if started {
		<-p.done
	}
	return nil
}
