package bolt

import (
	"context"
	"fmt"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

var bucketReleases = []byte("releases") // release id → ReleaseRecord

// SeeRelease records a release the first time it is seen; see
// broker.ReleaseRegistry.
func (e *Engine) SeeRelease(ctx context.Context, id string, now time.Time) (broker.Release, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return broker.Release{}, errClosed
	}
	if rec, ok := e.releases[id]; ok {
		e.mu.Unlock()
		return releaseOf(id, rec), nil
	}
	rec := &storagev1.ReleaseRecord{FirstSeen: now.UnixNano()}
	e.releases[id] = rec
	b := e.releaseChangedLocked(id, rec)
	e.mu.Unlock()
	return releaseOf(id, rec), e.commit.wait(ctx, b)
}

// DrainRelease marks a release draining; see broker.ReleaseRegistry.
func (e *Engine) DrainRelease(ctx context.Context, id string) (broker.Release, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return broker.Release{}, errClosed
	}
	old, ok := e.releases[id]
	if !ok {
		e.mu.Unlock()
		return broker.Release{}, fmt.Errorf("release %q was never seen: %w", id, broker.ErrNotFound)
	}
	rec := &storagev1.ReleaseRecord{FirstSeen: old.GetFirstSeen(), Draining: true}
	e.releases[id] = rec
	b := e.releaseChangedLocked(id, rec)
	e.mu.Unlock()
	return releaseOf(id, rec), e.commit.wait(ctx, b)
}

// Releases lists the releases, the newest first; see broker.ReleaseRegistry.
func (e *Engine) Releases(context.Context) ([]broker.Release, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, errClosed
	}
	out := make([]broker.Release, 0, len(e.releases))
	for id, rec := range e.releases {
		out = append(out, releaseOf(id, rec))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Newer(out[j]) })
	return out, nil
}

// releaseChangedLocked queues the write of a release's record.
func (e *Engine) releaseChangedLocked(id string, rec *storagev1.ReleaseRecord) *batch {
	v, err := proto.Marshal(rec)
	if err != nil {
		panic(err) // a record of two scalars always marshals
	}
	return e.commit.appendSyncLocked(func(w *txw) error { return w.tx.Bucket(bucketReleases).Put([]byte(id), v) }, nil)
}

func releaseOf(id string, rec *storagev1.ReleaseRecord) broker.Release {
	return broker.Release{ID: id, FirstSeen: time.Unix(0, rec.GetFirstSeen()).UTC(), Draining: rec.GetDraining()}
}
