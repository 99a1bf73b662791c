package scheduler

import (
	"context"
	"log/slog"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// Default retention of terminal tasks.
const (
	// DefaultRetention is how long a COMPLETED task is kept when it does
	// not say.
	DefaultRetention = 24 * time.Hour
	// DefaultArchiveRetention is how long ARCHIVED and CANCELED tasks are
	// kept.
	DefaultArchiveRetention = 7 * 24 * time.Hour
	// DefaultPurgeBatch bounds how many tasks one purge deletes, so that
	// one commit stays short.
	DefaultPurgeBatch = 10_000
	// PurgeInterval is the least time between two purges when the first
	// found less than a batch: a terminal task is deleted up to this long
	// after its retention ends. Without it, a server whose tasks keep a
	// short retention purges whenever the next one comes due and on every
	// timer signal, back to back: on PostgreSQL each purge walks the
	// purge indexes past the entries of the tasks it deleted before
	// (dead until VACUUM), and in a SOAK run at 800 tasks/s with a
	// minute's retention the purges took more of the database's time
	// than the leases.
	PurgeInterval = time.Second
)

// Retention says how long terminal tasks are kept. It is the one home of
// the retention rule: a task's own retention (the option) wins for a
// COMPLETED task; otherwise Completed applies to COMPLETED tasks and
// Archived to ARCHIVED and CANCELED ones.
type Retention struct {
	// Completed defaults to DefaultRetention.
	Completed time.Duration
	// Archived defaults to DefaultArchiveRetention.
	Archived time.Duration
}

func (r Retention) withDefaults() Retention {
	if r.Completed <= 0 {
		r.Completed = DefaultRetention
	}
	if r.Archived <= 0 {
		r.Archived = DefaultArchiveRetention
	}
	return r
}

// NewPurger returns the loop that deletes terminal tasks past their
// retention (purgeJob). It reads the wall clock at least every
// DefaultMaxSleep.
func NewPurger(b broker.Broker, r Retention, batch int, now func() time.Time, log *slog.Logger) *Loop {
	l := NewLoop("purger", purgeJob(b, r, batch), now, log)
	l.SetMaxSleep(DefaultMaxSleep)
	return l
}

// purgeJob deletes terminal tasks past their retention, at most batch (0:
// DefaultPurgeBatch) per commit, and at most once every PurgeInterval
// while it finds less than a batch. Its loop's goroutine is its only
// caller.
func purgeJob(b broker.Broker, r Retention, batch int) Job {
	r = r.withDefaults()
	if batch <= 0 {
		batch = DefaultPurgeBatch
	}
	var rested time.Time // the earliest time of the next purge
	return func(ctx context.Context, at time.Time) (time.Time, error) {
		if at.Before(rested) && rested.Sub(at) <= PurgeInterval {
			// A timer signal woke the loop before its rest ended. (A wall
			// clock stepped back further ends the rest: it must not hold
			// the purges off for as long as it stepped.)
			return rested, nil
		}
		next, err := b.Purge(ctx, broker.PurgeParams{
			Now:             at,
			CompletedBefore: subSat(at, r.Completed),
			ArchivedBefore:  subSat(at, r.Archived),
			Limit:           batch,
		})
		if err != nil {
			return time.Time{}, err
		}
		if next.More {
			return at, nil // more are due: go on at once
		}
		rested = at.Add(PurgeInterval)
		if due := r.next(next); !due.IsZero() {
			return laterOf(due, rested), nil
		}
		return time.Time{}, nil
	}
}

// next is when the earliest remaining terminal task becomes purgeable.
func (r Retention) next(n broker.PurgeNext) time.Time {
	var next time.Time
	for _, t := range []time.Time{n.Own, addIfSet(n.Completed, r.Completed), addIfSet(n.Archived, r.Archived)} {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	return next
}

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func addIfSet(t time.Time, d time.Duration) time.Time {
	if t.IsZero() {
		return t
	}
	return addSat(t, d)
}

// subSat is t - d, saturating instead of overflowing time.Time.
func subSat(t time.Time, d time.Duration) time.Time {
	if u := t.Add(-d); !u.After(t) {
		return u
	}
	return t.Add(-(1<<63 - 1))
}
