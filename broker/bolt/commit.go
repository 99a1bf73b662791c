package bolt

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/conveyor-dev/conveyor/broker"
)

// op is one write in a group commit. It runs inside the committer's
// read-write transaction, after every op queued before it.
type op func(w *txw) error

// batch is the set of ops that share one transaction and one fsync.
type batch struct {
	ops []op
	// waiters counts callers that block until the batch is durable.
	waiters int
	// post runs under Engine.mu once the batch is durable, in order.
	post []func()
	done chan struct{}
	err  error
}

func newBatch() *batch { return &batch{done: make(chan struct{})} }

// committer is the group-commit pipeline: callers append ops to the open
// batch (under Engine.mu); one goroutine takes the whole open batch, runs
// it in one bbolt transaction (one fsync), then opens the next. While a
// transaction commits, new ops accumulate, so the batch size grows with
// load and no caller ever pays for a commit of its own.
type committer struct {
	e        *Engine
	open     *batch // ops being collected
	inflight *batch // ops being committed
	kick     chan struct{}
	quit     chan struct{}
	wg       sync.WaitGroup

	// Lingering (see linger): while lingerTarget > 0 the committer waits
	// for the open batch to reach that many waiters; lingered is signalled
	// when it does. lastCommit is how long the latest commit took.
	lingerTarget int
	lingered     chan struct{}
	// urgent is signalled when the open batch gets its first waiter, to end
	// an async delay (see delayAsync).
	urgent     chan struct{}
	lastCommit time.Duration
	// storageErr is the error of the latest commit while the storage
	// refuses commits (nil once one succeeds).
	storageErr error
	// busy is the total time spent in transactions (under Engine.mu).
	busy time.Duration
	// committed is the bbolt id of the latest transaction committed (the
	// committer's own), applied that of the latest one whose post-commit
	// hooks have run (under Engine.mu; see Engine.currentLocked).
	committed, applied uint64

	// Transactions and Ops count commits and the ops they carried, so tests
	// and benchmarks can see how much group commit merges.
	transactions, ops int64
}

func (c *committer) start(e *Engine) {
	c.e = e
	c.open = newBatch()
	c.kick = make(chan struct{}, 1)
	c.lingered = make(chan struct{}, 1)
	c.urgent = make(chan struct{}, 1)
	c.quit = make(chan struct{})
	c.wg.Add(1)
	go c.loop()
}

func (c *committer) stop() {
	close(c.quit)
	c.wg.Wait()
}

// appendLocked queues op (and an optional post-commit hook) into the open
// batch and returns that batch. Engine.mu must be held.
func (c *committer) appendLocked(o op, post func()) *batch {
	b := c.open
	b.ops = append(b.ops, o)
	if post != nil {
		b.post = append(b.post, post)
	}
	if len(b.ops) == 1 {
		select {
		case c.kick <- struct{}{}:
		default:
		}
	}
	return b
}

// appendSyncLocked is appendLocked for a caller that will wait for the
// batch to be durable; the committer counts such callers to decide how
// long to linger.
func (c *committer) appendSyncLocked(o op, post func()) *batch {
	b := c.appendLocked(o, post)
	c.addWaiterLocked(b)
	return b
}

// addWaiterLocked records a caller that will wait for b to be durable.
func (c *committer) addWaiterLocked(b *batch) {
	b.waiters++
	if b == c.open && b.waiters == 1 {
		select {
		case c.urgent <- struct{}{}:
		default:
		}
	}
	if c.lingerTarget > 0 && b.waiters >= c.lingerTarget {
		c.lingerTarget = 0
		select {
		case c.lingered <- struct{}{}:
		default:
		}
	}
}

// syncPointLocked returns the latest batch that is not durable yet (nil if
// none) and counts the caller as its waiter, so an open batch of async ops
// is committed now rather than after its delay.
func (c *committer) syncPointLocked() *batch {
	if len(c.open.ops) > 0 {
		c.addWaiterLocked(c.open)
		return c.open
	}
	return c.inflight
}

// wait blocks until b is durable and returns its commit error.
func (c *committer) wait(ctx context.Context, b *batch) error {
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *committer) loop() {
	defer c.wg.Done()
	for {
		select {
		case <-c.kick:
			c.drain()
		case <-c.quit:
			c.drain()
			c.e.mu.Lock()
			c.failOpenLocked(errClosed)
			c.e.mu.Unlock()
			return
		}
	}
}

// drain commits batches until the open one is empty.
func (c *committer) drain() {
	e := c.e
	for {
		c.delayAsync()
		e.mu.Lock()
		b := c.open
		if len(b.ops) == 0 {
			e.mu.Unlock()
			return
		}
		c.open = newBatch()
		c.inflight = b
		e.mu.Unlock()

		err := c.commitRetrying(b)

		e.mu.Lock()
		c.transactions++
		c.ops += int64(len(b.ops))
		var op *opError
		switch {
		case err == nil:
			c.applied = c.committed
			for _, f := range b.post {
				f()
			}
		case errors.As(err, &op):
			// An op found the file other than memory said: memory is
			// wrong, so everything decided since is suspect.
			err = fmt.Errorf("commit: %w", err)
			e.log.Error("group commit failed; reloading indexes from the file", "err", err, "ops", len(b.ops))
			c.failOpenLocked(err)
			if rerr := e.reloadLocked(); rerr != nil {
				e.log.Error("reload after failed commit", "err", rerr)
			} else {
				e.signalRoomLocked()
			}
		default:
			// The engine is closing while the storage still fails: what
			// is not durable now never will be.
			err = fmt.Errorf("commit: %w", err)
			c.failOpenLocked(err)
		}
		c.inflight = nil
		took := c.lastCommit
		e.mu.Unlock()
		b.err = err
		close(b.done)
		if err == nil && e.cfg.OnCommit != nil {
			e.cfg.OnCommit(broker.Commit{Ops: len(b.ops), Took: took})
		}
		if b.waiters > 1 {
			c.linger(b.waiters)
		}
	}
}

// commitRetrying commits b. A commit the storage refuses (a full disk, an
// I/O error) leaves the file as it was, so the same batch is tried again,
// with a growing pause, until it succeeds or the engine closes: nothing
// decided is lost and memory never has to be rebuilt (which would stall
// every caller for as long as a full reload takes). Meanwhile callers
// that wait for durability (enqueues) keep waiting, bounded by their own
// contexts, and dispatch from what is already durable goes on. An error
// of an op (an *opError) is returned at once.
func (c *committer) commitRetrying(b *batch) error {
	e := c.e
	pause := commitRetryMin
	for attempt := 1; ; attempt++ {
		start := time.Now()
		err := c.commitOnce(b)
		c.lastCommit = time.Since(start)
		e.mu.Lock()
		c.busy += c.lastCommit
		e.mu.Unlock()
		var op *opError
		if err == nil || errors.As(err, &op) {
			if err == nil && attempt > 1 {
				e.log.Info("storage recovered: group commit succeeded", "attempts", attempt)
				c.setStorageErr(nil)
			}
			return err
		}
		c.setStorageErr(err)
		if attempt == 1 || attempt%10 == 0 {
			e.log.Error("group commit failed; retrying the same batch", "err", err, "attempt", attempt,
				"ops", len(b.ops), "pause", pause)
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-c.quit:
			t.Stop()
			return err
		}
		pause = min(2*pause, commitRetryMax)
	}
}

// Pauses between retries of a commit the storage refused.
const (
	commitRetryMin = 50 * time.Millisecond
	commitRetryMax = 5 * time.Second
)

func (c *committer) commitOnce(b *batch) error {
	if fault := c.e.cfg.commitFault; fault != nil {
		if err := fault(); err != nil {
			return err
		}
	}
	return c.e.db.Update(func(tx *bbolt.Tx) error {
		c.committed = uint64(tx.ID())
		return runOps(tx, b.ops)
	})
}

func (c *committer) setStorageErr(err error) {
	c.e.mu.Lock()
	c.storageErr = err
	c.e.mu.Unlock()
}

// delayAsync lets an open batch that nobody waits for (leases, results,
// heartbeats, progress: changes whose callers do not wait for the disk)
// collect more ops for up to Config.AsyncCommitDelay before it commits. It
// ends early when a caller starts waiting on the batch, and on Close. Under
// a steady stream of results this turns hundreds of small commits a second,
// each with two fsyncs, into a few large ones; it delays no caller.
func (c *committer) delayAsync() {
	e := c.e
	delay := e.cfg.AsyncCommitDelay
	e.mu.Lock()
	idle := len(c.open.ops) > 0 && c.open.waiters == 0
	e.mu.Unlock()
	if !idle || delay <= 0 {
		return
	}
	t := time.NewTimer(delay)
	select {
	case <-c.urgent:
	case <-t.C:
	case <-c.quit:
	}
	t.Stop()
}

// linger holds the next commit back briefly when the one just made served
// several waiting callers. Those callers come back with their next
// requests a moment later; committing at once would catch only the callers
// that arrived during the last commit, and the two groups would keep
// alternating, each paying a full commit. Waiting until the open batch has
// as many waiters as the last one and the open one together (or at most
// half a commit, and never more than Config.MaxCommitLinger) lets them
// share one fsync instead. A lone caller never waits.
func (c *committer) linger(served int) {
	e := c.e
	wait := min(c.lastCommit/2, e.cfg.MaxCommitLinger)
	if wait <= 0 {
		return
	}
	e.mu.Lock()
	target := served + c.open.waiters
	if c.open.waiters >= target {
		e.mu.Unlock()
		return
	}
	c.lingerTarget = target
	select { // drop a stale signal
	case <-c.lingered:
	default:
	}
	e.mu.Unlock()
	t := time.NewTimer(wait)
	select {
	case <-c.lingered:
	case <-t.C:
	case <-c.quit:
	}
	t.Stop()
	e.mu.Lock()
	c.lingerTarget = 0
	e.mu.Unlock()
}

// failOpenLocked fails every op queued so far: they were decided on memory
// state that is about to be rebuilt (or the engine is closing).
func (c *committer) failOpenLocked(err error) {
	b := c.open
	if len(b.ops) == 0 {
		return
	}
	c.open = newBatch()
	b.err = err
	close(b.done)
}
