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

// HeartbeatInterval is how often a worker should heartbeat for a lease of
// ttl: a third of it, so two heartbeats can be lost before a lease lapses.
func HeartbeatInterval(ttl time.Duration) time.Duration { return ttl / 3 }

// Deadline is a Dispatch's deadline: the earliest of the lease expiry, the
// task's absolute deadline and now plus the task's timeout.
func Deadline(now, expiry time.Time, t *broker.Task) time.Time {
	if b := t.AttemptBound(now); !b.IsZero() && b.Before(expiry) {
		return b
	}
	return expiry
}

// Reaper reclaims lapsed leases. The broker tells the session that held
// each one (broker.Notifier.LeaseLapsed) before the task can be redelivered;
// the server then cancels the task on that session.
type Reaper struct {
	*scheduler.Loop
}

// NewReaper returns a reaper over b.
func NewReaper(b broker.Broker, now func() time.Time, log *slog.Logger) *Reaper {
	job := func(ctx context.Context, at time.Time) (time.Time, error) {
		lapsed, next, err := b.ReapLeases(ctx, at)
		if len(lapsed) > 0 {
			log.Info("reclaimed lapsed leases", "count", len(lapsed))
		}
		return next, err
	}
	return &Reaper{Loop: scheduler.NewLoop("lease reaper", job, now, log)}
}
