package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// PromoteDue makes due SCHEDULED and RETRY tasks pending and archives
// waiting tasks whose expiry passed; see broker.Broker. Both come off
// time-ordered heaps, so the cost is proportional to the work done.
func (e *Engine) PromoteDue(_ context.Context, at time.Time) (time.Time, error) {
	now := at.UnixNano()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return time.Time{}, errClosed
	}
	for {
		t, ok := e.dueHeap.peek()
		if !ok {
			break
		}
		m, live := e.tasks.get(t.k)
		current := live && (m.state == stateScheduled || m.state == stateRetry) && m.due == t.at
		if current && t.at > now {
			break
		}
		e.dueHeap.pop()
		if current {
			e.toPendingLocked(t.k, m, now, nil)
		}
	}
	for {
		t, ok := e.expHeap.peek()
		if !ok {
			break
		}
		m, live := e.tasks.get(t.k)
		current := live && e.expires[t.k] == t.at
		if current && t.at > now {
			break
		}
		e.expHeap.pop()
		if current && isWaiting(m.state) {
			e.finishLocked(t.k, m, stateArchived, now, func(st *storagev1.TaskStatus) {
				st.LastError = "expired before it could run"
			})
		}
		// An expired task that is running keeps its entry in e.expires:
		// Lease archives it if it ever comes back to wait.
	}
	next := int64(0)
	if t, ok := e.dueHeap.peek(); ok {
		next = t.at
	}
	if t, ok := e.expHeap.peek(); ok && (next == 0 || t.at < next) {
		next = t.at
	}
	if next == 0 {
		return time.Time{}, nil
	}
	return time.Unix(0, next), nil
}

// purged is one task deleted by Purge, for the in-memory counts.
type purged struct {
	queue string
	state int32
}

// Purge deletes terminal tasks whose retention passed, reading the purge
// index (ordered by purge time) from its start; see broker.Broker.
func (e *Engine) Purge(ctx context.Context, at time.Time) (time.Time, error) {
	now := at.UnixNano()
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return time.Time{}, errClosed
	}
	if e.purgeNext == 0 || e.purgeNext > now {
		next := e.purgeNext
		e.mu.Unlock()
		return nanoTime(next), nil
	}
	// Decisions made after this point lower purgeNext from zero; the op
	// reports what the file holds, and the hook takes the earlier of both.
	e.purgeNext = 0
	var gone []purged
	var fileNext int64
	limit := e.cfg.PurgeBatch
	b := e.commit.appendSyncLocked(func(w *txw) error {
		var err error
		gone, fileNext, err = purgeDue(w, now, limit)
		return err
	}, func() {
		for _, p := range gone {
			if q := e.byName[p.queue]; q != nil {
				q.counts[p.state]--
			}
		}
		if fileNext != 0 && (e.purgeNext == 0 || fileNext < e.purgeNext) {
			e.purgeNext = fileNext
		}
	})
	e.mu.Unlock()
	if err := e.commit.wait(ctx, b); err != nil {
		return time.Time{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return nanoTime(e.purgeNext), nil
}

// purgeDue deletes up to limit tasks due for purging at now and returns
// them with the purge time of the first entry left.
func purgeDue(w *txw, now int64, limit int) ([]purged, int64, error) {
	c := w.purge.Cursor()
	var due [][]byte
	var next int64
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		at := int64(binary.BigEndian.Uint64(k[:8]))
		if at > now || len(due) == limit {
			next = at
			break
		}
		due = append(due, bytes.Clone(k))
	}
	var gone []purged
	var st storagev1.TaskStatus
	for _, pk := range due {
		at, id := int64(binary.BigEndian.Uint64(pk[:8])), pk[8:]
		if err := w.purge.Delete(pk); err != nil {
			return nil, 0, err
		}
		v := w.done.Get(id)
		if v == nil {
			continue // the task was deleted or revived meanwhile
		}
		st.Reset()
		if err := proto.Unmarshal(v, &st); err != nil {
			return nil, 0, fmt.Errorf("status of %x: %w", id, err)
		}
		if st.GetPurgeAt() != at {
			continue // finished again since; a later entry purges it
		}
		if err := w.done.Delete(id); err != nil {
			return nil, 0, err
		}
		if err := w.tasks.Delete(id); err != nil {
			return nil, 0, err
		}
		w.termDelta(st.GetQueue(), int32(st.GetState()), -1)
		gone = append(gone, purged{queue: st.GetQueue(), state: int32(st.GetState())})
	}
	return gone, next, nil
}

func nanoTime(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}
