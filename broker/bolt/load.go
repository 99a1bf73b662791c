package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// load creates the buckets of a new file, checks the schema version of an
// existing one and rebuilds every in-memory index from it.
func (e *Engine) load() error {
	err := e.db.Update(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketMeta, bucketTasks, bucketLive, bucketDone, bucketPurge, bucketEnded, bucketQueues, bucketIndex, bucketDependents, bucketCron} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		mb := tx.Bucket(bucketMeta)
		v := mb.Get(keySchema)
		if v == nil {
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], schemaVersion)
			return mb.Put(keySchema, b[:])
		}
		if len(v) != 8 {
			return fmt.Errorf("schema version record is %d bytes, want 8", len(v))
		}
		switch got := binary.BigEndian.Uint64(v); got {
		case schemaVersion:
			return nil
		case 1:
			return migrateV1(tx, e.log)
		default:
			return fmt.Errorf("data file has schema version %d; this build reads version %d", got, schemaVersion)
		}
	})
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reloadLocked()
}

// reloadLocked drops the in-memory state and rebuilds it from the file. A
// task found ACTIVE is made PENDING (its session cannot exist any more), in
// one transaction, before anything is dispatched.
func (e *Engine) reloadLocked() error {
	e.freeIndexesLocked()
	e.tasks = newTable(0)
	e.queues = nil
	e.byName = make(map[string]*queue)
	e.leases = make(map[key]*lease)
	e.unique = make(map[string]uniqueClaim)
	e.uniqOf = make(map[key]string)
	e.expires = make(map[key]int64)
	e.retention = make(map[key]int64)
	e.ckeys = make(map[ckeyID]*ckey)
	e.keyOf = make(map[key]*ckey)
	e.settling = make(map[key]settled)
	e.deps = make(map[key][]depEdge)
	e.openGroups = make(map[groupID]*group)
	e.crons = make(map[string]*storagev1.CronRecord)
	e.groupHeap = nil
	e.dueHeap, e.expHeap, e.leaseHeap = nil, nil, nil
	e.purgeNext, e.endedFirst = 0, [numClasses]int64{}

	var wasActive, wasCanceled []key
	var canceledIn []string // wasCanceled[i]'s queue
	err := e.db.View(func(tx *bbolt.Tx) error {
		if err := tx.Bucket(bucketQueues).ForEach(func(name, v []byte) error {
			rec := &storagev1.QueueRecord{}
			if err := proto.Unmarshal(v, rec); err != nil {
				return fmt.Errorf("queue record %q: %w", name, err)
			}
			q := e.queueLocked(string(name))
			q.paused = rec.GetPaused()
			q.counts[stateCompleted] = rec.GetCompleted()
			q.counts[stateArchived] = rec.GetArchived()
			q.counts[stateCanceled] = rec.GetCanceled()
			q.processed, q.failed, q.enqueued = rec.GetProcessed(), rec.GetFailed(), rec.GetEnqueued()
			q.cfg = queueConfigOf(rec)
			return nil
		}); err != nil {
			return err
		}
		if err := tx.Bucket(bucketCron).ForEach(func(id, v []byte) error {
			rec := &storagev1.CronRecord{}
			if err := proto.Unmarshal(v, rec); err != nil {
				return fmt.Errorf("cron entry %q: %w", id, err)
			}
			e.crons[string(id)] = rec
			return nil
		}); err != nil {
			return err
		}
		live := tx.Bucket(bucketLive)
		// Size the table once, instead of growing it through the scan.
		e.tasks.free()
		e.tasks = newTable(live.Stats().KeyN)
		st := &storagev1.TaskStatus{}
		c := live.Cursor()
		for kb, v := c.First(); kb != nil; kb, v = c.Next() {
			var k key
			copy(k[:], kb)
			st.Reset()
			if err := proto.Unmarshal(v, st); err != nil {
				return fmt.Errorf("status of %s: %w", k, err)
			}
			if err := checkLiveStatus(st); err != nil {
				return fmt.Errorf("status of %s: %w", k, err)
			}
			if stateOf(st) == stateActive && st.GetCancelRequested() {
				// Canceled while it ran, and its worker is gone: canceled.
				wasCanceled = append(wasCanceled, k)
				canceledIn = append(canceledIn, st.GetQueue())
				continue
			}
			if stateOf(st) == stateActive {
				wasActive = append(wasActive, k)
				st.State = int32(statePending)
			}
			e.indexLiveLocked(k, st)
		}
		e.purgeNext, e.endedFirst = firstEnded(tx)
		return nil
	})
	if err != nil {
		return fmt.Errorf("rebuild indexes: %w", err)
	}
	if len(wasActive)+len(wasCanceled) > 0 {
		now := nanos(e.cfg.Now())
		err = e.db.Update(func(tx *bbolt.Tx) error {
			w := newTxw(tx)
			for _, k := range wasActive {
				if err := w.updateLive(k, func(st *storagev1.TaskStatus) { st.State = int32(statePending) }); err != nil {
					return err
				}
			}
			for _, k := range wasCanceled {
				if err := w.finish(k, 0, func(st *storagev1.TaskStatus) {
					st.State, st.CompletedAt = int32(stateCanceled), now
				}); err != nil {
					return err
				}
			}
			return w.flush()
		})
		if err != nil {
			return fmt.Errorf("release tasks that were active: %w", err)
		}
		for _, name := range canceledIn {
			e.queueLocked(name).counts[stateCanceled]++
			e.endedFirst[classArchived] = minSet(e.endedFirst[classArchived], now)
		}
		e.log.Info("released tasks that were active when the file was closed", "count", len(wasActive))
	}
	return nil
}

// checkLiveStatus refuses a live record the indexes cannot hold: a file
// damaged or written by something else than this engine. Open then fails,
// naming the task, rather than indexing out of range or losing the task.
func checkLiveStatus(st *storagev1.TaskStatus) error {
	if s := stateOf(st); !s.Waiting() && s != stateActive {
		return fmt.Errorf("state %d is not a live state", s)
	}
	if p := st.GetPriority(); p < 1 || p > 9 {
		return fmt.Errorf("priority %d is not 1..9", p)
	}
	if st.GetQueue() == "" {
		return errors.New("no queue")
	}
	return nil
}

// indexLiveLocked adds one durable live task to the in-memory indexes.
func (e *Engine) indexLiveLocked(k key, st *storagev1.TaskStatus) {
	q := e.queueLocked(st.GetQueue())
	m := meta{
		due:      st.GetNextProcessAt(),
		queue:    q.index,
		retried:  st.GetRetried(),
		maxRetry: st.GetMaxRetry(),
		state:    stateOf(st),
		prio:     uint8(st.GetPriority()),
		flags:    flagCommitted,
	}
	q.counts[m.state]++
	if ck := st.GetConcurrencyKey(); ck != "" {
		e.keyOf[k] = e.ckeyLocked(q, ck)
	}
	switch m.state {
	case stateScheduled, stateRetry:
		e.dueHeap.add(timed{at: m.due, k: k})
	case statePending:
		m.due = 0 // when it became pending is not stored; next_process_at may be later (RunTask)
	}
	if uk := st.GetUniqueKey(); uk != "" {
		// Several live tasks may name one key when earlier claims ran out
		// of TTL. A claim is granted only once the one before it ran out,
		// so the holder is the task that claimed last, whatever order the
		// scan (by id, which a producer may choose) meets them in.
		c := uniqueClaim{k: k, until: st.GetUniqueUntil(), since: st.GetEnqueuedAt()}
		if old, ok := e.unique[uk]; !ok || c.since > old.since || c.since == old.since && c.k.Compare(old.k) > 0 {
			e.unique[uk] = c
		}
		e.uniqOf[k] = uk
	}
	if st.Retention != nil {
		e.retention[k] = st.GetRetention()
	}
	e.indexExpiryLocked(k, &m, st)
	if m.state == stateBlocked {
		e.linkDepsLocked(k, &m, st.GetWaitingOn())
		if st.GetDependencyFailed() {
			m.flags |= flagDepFailed
		}
	}
	e.tasks.put(k, m)
	switch m.state {
	case statePending:
		e.pushReadyLocked(k)
	case stateAggr:
		e.joinGroupLocked(k, q, st.GetGroup(), st.GetType(), st.GetEnqueuedAt(), nanos(e.cfg.Now()))
	}
}
