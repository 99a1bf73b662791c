package scheduler

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// RetryDelay is how long a Loop waits after its job failed before running
// it again.
const RetryDelay = time.Second

// DefaultMaxSleep is how long at most a loop that waits for wall-clock
// times sleeps before it reads the clock again (SetMaxSleep). Its timer
// runs on the monotonic clock, which stands still while the machine is
// suspended and does not follow a wall clock stepped forward (NTP, a VM
// restored from a snapshot): without a bound, a task due in a week would
// wait a week of monotonic time after the wall clock jumped past it.
const DefaultMaxSleep = time.Minute

// Job does one round of timed work at now and returns when it is next due
// (zero when nothing is waiting: the loop then sleeps until kicked).
type Job func(ctx context.Context, now time.Time) (next time.Time, err error)

// Loop runs a Job at the times it asks for: once at start, then whenever
// it is due or kicked, until stopped. It is the timer every background
// role here is built on.
type Loop struct {
	name string
	job  Job
	now  func() time.Time
	log  *slog.Logger

	kick    chan struct{}
	cancel  context.CancelFunc
	done    chan struct{}
	started bool
	mu      sync.Mutex

	maxSleep time.Duration // 0: sleep until the due time, however far
	// gate, when set, says whether the job may run now (the leader's
	// jobs on several nodes); see SetGate.
	gate func() bool
}

// NewLoop returns a loop that runs job. now defaults to time.Now.
func NewLoop(name string, job Job, now func() time.Time, log *slog.Logger) *Loop {
	if now == nil {
		now = time.Now
	}
	return &Loop{name: name, job: job, now: now, log: log, kick: make(chan struct{}, 1), done: make(chan struct{})}
}

// Name names the loop, for logs.
func (l *Loop) Name() string { return l.name }

// SetMaxSleep bounds how long the loop sleeps while a due time is
// pending, so that it notices a wall clock that moved past that time (see
// DefaultMaxSleep); 0, the default, sleeps until the due time. Call it
// before Start.
func (l *Loop) SetMaxSleep(d time.Duration) { l.maxSleep = d }

// SetGate makes the loop run its job only while gate answers true: a
// round it may not run sleeps until the next Kick, which the caller sends
// when the answer changes. Call it before Start.
func (l *Loop) SetGate(gate func() bool) { l.gate = gate }

// Start starts the loop; it returns at once. The loop runs until Stop:
// its jobs get ctx's values but not its end, so that a start context's
// cancellation cannot stop a timer behind the back of the shutdown order
// (the server stops its loops in an order of its own). Starting a loop
// twice is a no-op.
func (l *Loop) Start(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.started {
		return nil
	}
	l.started = true
	ctx, l.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go l.run(ctx)
	return nil
}

// Kick makes the loop run its job soon, to learn of an earlier due time.
func (l *Loop) Kick() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Stop ends the loop and waits, bounded by ctx, for a running job to
// return. It is idempotent, and a no-op for a loop never started.
func (l *Loop) Stop(ctx context.Context) error {
	l.mu.Lock()
	if !l.started {
		l.mu.Unlock()
		return nil
	}
	l.cancel()
	l.mu.Unlock()
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (l *Loop) run(ctx context.Context) {
	defer close(l.done)
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		case <-l.kick:
		}
		if l.gate != nil && !l.gate() {
			timer.Stop()
			continue
		}
		now := l.now()
		next, err := l.job(ctx, now)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			l.log.Error("timed job failed", "job", l.name, "err", err)
			next = now.Add(RetryDelay)
		}
		timer.Stop()
		if !next.IsZero() {
			timer.Reset(l.sleep(next))
		}
	}
}

// sleep is how long to wait for next, bounded by maxSleep.
func (l *Loop) sleep(next time.Time) time.Duration {
	d := max(next.Sub(l.now()), 0)
	if l.maxSleep > 0 {
		d = min(d, l.maxSleep)
	}
	return d
}
