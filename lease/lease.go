package lease

import (
	"context"
	"log/slog"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/scheduler"
)

// DefaultTTL is the default lease duration.
const DefaultTTL = 60 * time.Second

// DefaultLimitGrace is how long past its deadline or timeout an attempt
// may keep its lease before the reaper takes the task back.
const DefaultLimitGrace = 5 * time.Second

// HeartbeatInterval is how often a worker should heartbeat for a lease of
// ttl: a third of it, so two heartbeats can be lost before a lease lapses.
func HeartbeatInterval(ttl time.Duration) time.Duration { return ttl / 3 }

// Bound is the latest time an attempt of t that starts at now may run:
// the earlier of the task's deadline and now plus its timeout, or zero
// when it has neither. (The lease expiry bounds the attempt too, but
// heartbeats move it.)
func Bound(t *broker.Task, now time.Time) time.Time {
	bound := t.Deadline
	if t.Timeout > 0 {
		if b := addSat(now, t.Timeout); bound.IsZero() || b.Before(bound) {
			bound = b
		}
	}
	return bound
}

// Limit is the latest expiry any renewal may give the lease of an attempt
// of t that starts at now: its Bound plus grace, zero when unbounded.
// Heartbeats cannot keep such an attempt alive past it, so a worker that
// ignores its deadline loses the task to the reaper (a failed attempt, and
// a Cancel) instead of holding it forever.
func Limit(t *broker.Task, now time.Time, grace time.Duration) time.Time {
	b := Bound(t, now)
	if b.IsZero() {
		return b
	}
	return addSat(b, grace)
}

// DispatchDeadline is the deadline a Dispatch carries: the earlier of the
// lease expiry and the attempt's Bound. (It is not the task's deadline,
// which is one of its inputs.)
func DispatchDeadline(now, expiry time.Time, t *broker.Task) time.Time {
	if b := Bound(t, now); !b.IsZero() && b.Before(expiry) {
		return b
	}
	return expiry
}

// NewReaper returns the loop that reclaims lapsed leases: it asks the
// broker which leases lapsed, decides each (scheduler.Retrier.AfterLapse)
// and reclaims them; the broker tells the session that held each one
// (broker.Notifier.LeaseLapsed) before the task can be redelivered, and
// the server then cancels the task on that session.
func NewReaper(b broker.Broker, r scheduler.Retrier, now func() time.Time, log *slog.Logger) *scheduler.Loop {
	job := func(ctx context.Context, at time.Time) (time.Time, error) {
		lapsed, next, err := b.LapsedLeases(ctx, at)
		if err != nil || len(lapsed) == 0 {
			return next, err
		}
		decisions := make([]broker.Decision, len(lapsed))
		for i, l := range lapsed {
			decisions[i] = r.AfterLapse(l, at)
		}
		if err := b.Reclaim(ctx, decisions); err != nil {
			return time.Time{}, err
		}
		log.Info("reclaimed lapsed leases", "count", len(lapsed))
		return at, nil // look again: more may have lapsed meanwhile
	}
	// No SetMaxSleep: after a wall clock stepped forward, an early round
	// would see every lease as lapsed before its worker's next heartbeat.
	return scheduler.NewLoop("lease reaper", job, now, log)
}

// addSat is t + d, saturating instead of overflowing time.Time.
func addSat(t time.Time, d time.Duration) time.Time {
	if u := t.Add(d); !u.Before(t) {
		return u
	}
	return t.Add(1<<63 - 1)
}
