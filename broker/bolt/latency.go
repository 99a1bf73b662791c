package bolt

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// OldestReady reads the first valid entry of each of the queue's ready
// FIFOs (and passed-over lines): each is the longest-waiting of its
// priority, so the earliest of them is the queue's. Their cost is the
// stale entries before them, which compaction bounds (compact.go). A task
// loaded at start does not know when it became ready (meta.due is 0): its
// stored next-process time stands in, capped at now; see
// broker.LatencyReporter.
func (e *Engine) OldestReady(_ context.Context, name string, now time.Time) (time.Time, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return time.Time{}, errClosed
	}
	var oldest int64
	var unknown []key
	if q := e.byName[name]; q != nil && q.readyN > 0 {
		note := func(k key, ok bool) {
			if !ok {
				return
			}
			if m, _ := e.tasks.get(k); m.due == 0 {
				unknown = append(unknown, k)
			} else if oldest == 0 || m.due < oldest {
				oldest = m.due
			}
		}
		for p := range q.ready {
			valid := func(k key) bool { m, live := e.tasks.get(k); return live && m.readyIn(q, p) }
			if q.readyPass != nil && q.readyPass.prio == p {
				note(q.readyPass.kept.first(valid))
			}
			note(q.ready[p].first(valid))
			for _, line := range q.passed {
				note(line.ready[p].first(func(k key) bool { m, live := e.tasks.get(k); return live && m.passedIn(q, p, line.kind) }))
			}
		}
	}
	e.mu.Unlock()
	if len(unknown) > 0 {
		at, err := e.dueOf(unknown, now)
		if err != nil {
			return time.Time{}, err
		}
		if at != 0 && (oldest == 0 || at < oldest) {
			oldest = at
		}
	}
	if oldest == 0 {
		return time.Time{}, nil
	}
	return time.Unix(0, oldest).UTC(), nil
}

// dueOf is the earliest stored next-process time of tasks, each capped at
// now (a task run early keeps a later one); a task gone meanwhile is
// skipped.
func (e *Engine) dueOf(keys []key, now time.Time) (int64, error) {
	var earliest int64
	err := e.view(func(tx *bbolt.Tx) error {
		live := tx.Bucket(bucketLive)
		for _, k := range keys {
			v := live.Get(k[:])
			if v == nil {
				continue
			}
			var st storagev1.TaskStatus
			if err := proto.Unmarshal(v, &st); err != nil {
				return fmt.Errorf("status of %s: %w", k, err)
			}
			at := min(st.GetNextProcessAt(), now.UnixNano())
			if earliest == 0 || at < earliest {
				earliest = at
			}
		}
		return nil
	})
	return earliest, err
}

var _ broker.LatencyReporter = (*Engine)(nil)
