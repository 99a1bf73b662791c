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

// Bound is the latest time an attempt of t that starts at now may run
// (broker.AttemptBound): the earlier of the task's deadline and now plus
// its timeout, or zero when it has neither.
func Bound(t *broker.Task, now time.Time) time.Time {
	return broker.AttemptBound(t.Deadline, t.Timeout, now)
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
