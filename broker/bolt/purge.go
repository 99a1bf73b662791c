package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// Purge deletes terminal tasks past the horizons p gives; see
// broker.Broker. Both indexes are read from their start (they are ordered
// by time), and memory remembers the earliest entry of each, so a purge
// with nothing due costs no read at all.
func (e *Engine) Purge(ctx context.Context, p broker.PurgeParams) (broker.PurgeNext, error) {
	horizons := [1 + numClasses]int64{nanos(p.Now), nanos(p.CompletedBefore), nanos(p.ArchivedBefore)}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return broker.PurgeNext{}, errClosed
	}
	if !e.purgeDueLocked(horizons) {
		next := e.purgeNextLocked(false)
		e.mu.Unlock()
		return next, nil
	}
	// Decisions made after this point lower the remembered firsts from
	// zero; the op reports what the file holds, and the hook keeps the
	// earlier of both.
	e.purgeNext, e.endedFirst = 0, [numClasses]int64{}
	var res purgeResult
	limit := max(p.Limit, 1)
	e.purging++
	for i, h := range horizons {
		e.purgeHorizons[i] = max(e.purgeHorizons[i], h)
	}
	b := e.commit.appendSyncLocked(func(w *txw) error {
		var err error
		res, err = purgeDue(w, horizons, limit)
		return err
	}, func() {
		e.purging--
		for _, g := range res.gone {
			if q := e.byName[g.queue]; q != nil {
				q.counts[g.state]--
			}
		}
		e.purgeNext = minSet(e.purgeNext, res.firsts[0])
		for c := range numClasses {
			e.endedFirst[c] = minSet(e.endedFirst[c], res.firsts[1+c])
		}
	})
	e.mu.Unlock()
	if err := e.commit.wait(ctx, b); err != nil {
		return broker.PurgeNext{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.purgeNextLocked(res.more), nil
}

// purgeDueLocked reports whether any index has an entry within its horizon.
func (e *Engine) purgeDueLocked(h [1 + numClasses]int64) bool {
	if e.purgeNext != 0 && e.purgeNext <= h[0] {
		return true
	}
	for c := range numClasses {
		if e.endedFirst[c] != 0 && e.endedFirst[c] <= h[1+c] {
			return true
		}
	}
	return false
}

func (e *Engine) purgeNextLocked(more bool) broker.PurgeNext {
	return broker.PurgeNext{Own: fromNanos(e.purgeNext), Completed: fromNanos(e.endedFirst[classCompleted]),
		Archived: fromNanos(e.endedFirst[classArchived]), More: more}
}

func minSet(a, b int64) int64 {
	if a == 0 || (b != 0 && b < a) {
		return b
	}
	return a
}

// purgeResult is what one purge commit did.
type purgeResult struct {
	gone []purged
	// firsts are the times of the first entries left: own retention, then
	// each class (0: none).
	firsts [1 + numClasses]int64
	more   bool
}

// purged is one task deleted by Purge, for the in-memory counts.
type purged struct {
	queue string
	state broker.State
}

// purgeDue deletes up to limit tasks within the horizons: the own-retention
// index up to h[0], then each class of the ended index up to its horizon.
func purgeDue(w *txw, h [1 + numClasses]int64, limit int) (purgeResult, error) {
	var res purgeResult
	scan := func(c *bbolt.Cursor, prefix []byte, horizon int64, slot int) error {
		var due [][]byte
		k, _ := c.Seek(prefix)
		for ; k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			at := int64(binary.BigEndian.Uint64(k[len(prefix):]))
			if at > horizon {
				res.firsts[slot] = at
				break
			}
			if len(res.gone)+len(due) >= limit {
				res.firsts[slot], res.more = at, true
				break
			}
			due = append(due, bytes.Clone(k))
		}
		for _, ik := range due {
			at, id := int64(binary.BigEndian.Uint64(ik[len(prefix):])), ik[len(prefix)+8:]
			if err := c.Bucket().Delete(ik); err != nil {
				return err
			}
			g, err := purgeOne(w, id, at, slot == 0)
			if err != nil {
				return err
			}
			if g != nil {
				res.gone = append(res.gone, *g)
			}
		}
		return nil
	}
	if err := scan(w.purge.Cursor(), []byte{}, h[0], 0); err != nil {
		return res, err
	}
	for c := range numClasses {
		if err := scan(w.ended.Cursor(), []byte{byte(c)}, h[1+c], 1+c); err != nil {
			return res, err
		}
	}
	return res, nil
}

// purgeOne deletes a terminal task whose index entry at came due, unless
// the entry is stale (the task was deleted, revived, or finished again
// since: a later entry purges it).
func purgeOne(w *txw, id []byte, at int64, own bool) (*purged, error) {
	v := w.done.Get(id)
	if v == nil {
		return nil, nil
	}
	var st storagev1.TaskStatus
	if err := proto.Unmarshal(v, &st); err != nil {
		return nil, fmt.Errorf("status of %x: %w", id, err)
	}
	if own && st.GetPurgeAt() != at || !own && (st.GetPurgeAt() != 0 || st.GetCompletedAt() != at) {
		return nil, nil
	}
	if err := w.done.Delete(id); err != nil {
		return nil, err
	}
	if err := w.tasks.Delete(id); err != nil {
		return nil, err
	}
	var k key
	copy(k[:], id)
	if err := w.index.Delete(indexKey(st.GetQueue(), stateOf(&st), st.GetType(), k)); err != nil {
		return nil, err
	}
	if err := w.dropDependents(k); err != nil {
		return nil, err
	}
	w.termDelta(st.GetQueue(), stateOf(&st), -1)
	return &purged{queue: st.GetQueue(), state: stateOf(&st)}, nil
}

// firstEnded reads the earliest entry of each index (for a rebuild).
func firstEnded(tx *bbolt.Tx) (own int64, classes [numClasses]int64) {
	if k, _ := tx.Bucket(bucketPurge).Cursor().First(); k != nil {
		own = int64(binary.BigEndian.Uint64(k[:8]))
	}
	c := tx.Bucket(bucketEnded).Cursor()
	for class := range numClasses {
		if k, _ := c.Seek([]byte{byte(class)}); k != nil && k[0] == byte(class) {
			classes[class] = int64(binary.BigEndian.Uint64(k[1:9]))
		}
	}
	return own, classes
}
