package push

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// consumer is one queue's push endpoint: it leases the queue's tasks
// while it has credit (the endpoint's concurrency less the invocations in
// flight) and invokes the endpoint with each. It wakes on ready work, on
// a freed slot and on a change of settings or leadership; it never polls.
type consumer struct {
	pool      *Pool
	queue     string
	sessionID string
	started   time.Time
	wakeCh    chan struct{}
	done      chan struct{}

	mu       sync.Mutex
	settings Settings
	client   *http.Client
	inflight map[string]*invocation // by task id
	// stopping refuses new leases (the endpoint was removed, or the server
	// stops); gone is set by a 410 until the settings change.
	stopping, gone bool
	wg             sync.WaitGroup // the invocations

	parked parking // the loop's alone (park.go)
}

func newConsumer(p *Pool, queue string, s Settings) *consumer {
	c := &consumer{pool: p, queue: queue, sessionID: SessionID(queue), started: p.now(), wakeCh: make(chan struct{}, 1),
		done: make(chan struct{}), inflight: map[string]*invocation{}}
	c.settings, c.client = s, newClient(s)
	return c
}

// SessionID is the id a queue's push endpoint leases under, and is listed
// under by ListWorkers.
func SessionID(queue string) string { return "push:" + queue }

// newClient is an endpoint's own HTTP client: its own connection pool, so
// that one slow or dead endpoint never holds up another's requests; no
// redirects followed (a redirect proves nothing, and would let an endpoint
// point the server elsewhere); bounded dials and TLS handshakes. The
// request's deadline bounds the rest.
func newClient(s Settings) *http.Client {
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		ForceAttemptHTTP2:     true,
		TLSHandshakeTimeout:   10 * time.Second,
		MaxIdleConns:          s.Concurrency,
		MaxIdleConnsPerHost:   s.Concurrency,
		MaxConnsPerHost:       s.Concurrency,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// wake asks the loop to look for work; a wake already pending suffices.
func (c *consumer) wake() {
	select {
	case c.wakeCh <- struct{}{}:
	default:
	}
}

// configure applies new settings: invocations in flight finish under the
// old ones; a 410 is forgotten (an operator acted).
func (c *consumer) configure(s Settings) {
	c.mu.Lock()
	if s != c.settings {
		if s.URL != c.settings.URL || s.Concurrency != c.settings.Concurrency {
			c.client.CloseIdleConnections()
			c.client = newClient(s)
		}
		c.settings, c.gone = s, false
	}
	c.mu.Unlock()
	c.wake()
}

// run leases and invokes until ctx ends or the consumer stops. It first
// names its route (the zero one: an endpoint takes every type and no
// at-most-once task) to an engine that readies itself for a route's
// leases (broker.LeaseWarmer), so that its first tasks do not wait for it.
func (c *consumer) run(ctx context.Context) {
	defer close(c.done)
	defer c.unpark()
	if w, ok := c.pool.broker.(broker.LeaseWarmer); ok {
		w.WarmLeases(ctx, broker.Route{})
	}
	var outage time.Duration
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.wakeCh:
		}
		if c.isStopping() {
			return
		}
		if err := c.fill(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			// The store failed: try again later, by a timer.
			outage = min(max(2*outage, 100*time.Millisecond), 2*time.Second)
			if !errors.Is(err, broker.ErrUnavailable) {
				c.pool.log.Error("lease for the push endpoint", "queue", c.queue, "err", err)
			}
			time.AfterFunc(outage, c.wake)
			continue
		}
		outage = 0
	}
}

func (c *consumer) isStopping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopping
}

// free is how many more invocations may start now.
func (c *consumer) free() (int, Settings, *http.Client) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping || c.gone || !c.pool.leading() {
		return 0, c.settings, c.client
	}
	return c.settings.Concurrency - len(c.inflight), c.settings, c.client
}

// fill invokes what the enqueues leased to the endpoint's parked lease,
// leases as many more ready tasks as there is credit for and starts their
// invocations, and opens the credit left to the enqueues (park.go).
func (c *consumer) fill(ctx context.Context) error {
	ready := []int{0}
	for {
		n, s, client := c.free()
		n = max(c.startParked(n, client), 0)
		c.pool.broker.Ready([]string{c.queue}, ready)
		keep := c.offer(n, min(n, ready[0]), s)
		if keep <= 0 {
			return nil
		}
		now := c.pool.now()
		leases, err := c.pool.broker.Lease(ctx, broker.LeaseParams{SessionID: c.sessionID,
			Picks: []broker.QueuePick{{Queue: c.queue, N: keep}}, Now: now, TTL: s.Timeout + leaseMargin, LimitGrace: c.pool.limitGrace,
			Push: true})
		if err != nil {
			return err
		}
		if len(leases) == 0 {
			// Taken by a session, or held by a cap: a signal wakes us, and
			// the enqueues may have the slots meanwhile.
			c.offer(n, 0, s)
			return nil
		}
		for _, l := range leases {
			c.start(l, s, client, now)
		}
	}
}

// leaseMargin is how long a pushed task's lease outlives its invocation's
// deadline: the answer is recorded within it, so the reaper takes the
// lease back only when the server died mid-invocation.
const leaseMargin = 15 * time.Second

// start records an invocation and runs it on its own goroutine.
func (c *consumer) start(l broker.Lease, s Settings, client *http.Client, now time.Time) {
	inv := newInvocation(c, l, s, now)
	c.mu.Lock()
	c.inflight[l.Task.ID] = inv
	c.wg.Add(1)
	c.mu.Unlock()
	c.pool.metrics.TaskDispatched(l.Task, now)
	go func() {
		defer c.wg.Done()
		inv.run(client)
		c.mu.Lock()
		if c.inflight[l.Task.ID] == inv {
			delete(c.inflight, l.Task.ID)
		}
		c.mu.Unlock()
		c.wake()
	}()
}

// abort ends the invocation holding lease ref, if any, with cause.
func (c *consumer) abort(ref broker.LeaseRef, cause error) {
	c.mu.Lock()
	inv := c.inflight[ref.TaskID]
	c.mu.Unlock()
	if inv != nil && inv.lease.Token == ref.Token {
		inv.abort(cause)
	}
}

// markGone stops new invocations after a 410, until the settings change.
func (c *consumer) markGone() {
	c.mu.Lock()
	first := !c.gone
	c.gone = true
	url := c.settings.URL
	c.mu.Unlock()
	if first {
		c.pool.log.Warn("push endpoint answered 410 Gone: sending it nothing more until its queue's push settings change",
			"queue", c.queue, "url", url)
	}
}

// stop refuses new leases, waits for the loop to end (it hands back what
// its parked lease holds) and for the invocations in flight until ctx
// ends, then aborts those left with cause (each still records its
// attempt).
func (c *consumer) stop(ctx context.Context, cause error) {
	c.mu.Lock()
	c.stopping = true
	c.mu.Unlock()
	c.wake()
	<-c.done // no invocation starts from here; what the parked lease held is handed back
	idle := make(chan struct{})
	go func() {
		c.wg.Wait()
		close(idle)
	}()
	select {
	case <-idle:
	case <-ctx.Done():
		c.mu.Lock()
		for _, inv := range c.inflight {
			inv.abort(cause)
		}
		c.mu.Unlock()
		<-idle
	}
	c.client.CloseIdleConnections()
}

// Info describes an endpoint for ListWorkers.
type Info struct {
	SessionID   string
	Queue       string
	URL         string
	Concurrency int
	InFlight    int
	TaskIDs     []string
	Gone        bool
	Started     time.Time
}

func (c *consumer) info() Info {
	c.mu.Lock()
	defer c.mu.Unlock()
	ids := make([]string, 0, len(c.inflight))
	for id := range c.inflight {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return Info{SessionID: c.sessionID, Queue: c.queue, URL: c.settings.URL, Concurrency: c.settings.Concurrency,
		InFlight: len(ids), TaskIDs: ids, Gone: c.gone, Started: c.started}
}
