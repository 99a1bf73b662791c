package broker

import (
	"context"
	"time"
)

// Release is a worker release (Hello.release_id) as the engine records it:
// releases rank by when each was first seen, the newest first, and a
// drained one is sent no new work.
type Release struct {
	ID        string
	FirstSeen time.Time
	Draining  bool
}

// Newer reports whether r ranks above o: seen later, or at the same
// moment with a greater id (a total order, the same on every node).
func (r Release) Newer(o Release) bool {
	if !r.FirstSeen.Equal(o.FirstSeen) {
		return r.FirstSeen.After(o.FirstSeen)
	}
	return r.ID > o.ID
}

// ReleaseRegistry records the releases, durably, so that a restart or a
// reconnect never makes old code look new.
type ReleaseRegistry interface {
	// SeeRelease records release id as first seen at now unless it was
	// seen before, and returns it as recorded.
	SeeRelease(ctx context.Context, id string, now time.Time) (Release, error)
	// DrainRelease marks a release seen before as draining (ErrNotFound
	// otherwise), and returns it.
	DrainRelease(ctx context.Context, id string) (Release, error)
	// Releases lists every release seen, the newest first.
	Releases(ctx context.Context) ([]Release, error)
}
