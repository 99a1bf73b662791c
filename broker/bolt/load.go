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
		err := scanLive(live, func(k key, st *storagev1.TaskStatus) error {
			if err := checkLiveStatus(st); err != nil {
				return fmt.Errorf("status of %s: %w", k, err)
			}
			if stateOf(st) == stateActive && st.GetCancelRequested() {
				// Canceled while it ran, and its worker is gone: canceled.
				wasCanceled = append(wasCanceled, k)
				canceledIn = append(canceledIn, st.GetQueue())
				return nil
			}
			if stateOf(st) == stateActive {
				wasActive = append(wasActive, k)
				st.State = int32(statePending)
			}
			e.indexLiveLocked(k, st)
			return nil
		})
		if err != nil {
			return err
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

// scanChunk is how many live records the decoder hands over at a time.
const scanChunk = 1024

// liveChunk is a run of decoded live records, in key order.
type liveChunk struct {
	keys []key
	sts  []storagev1.TaskStatus
	err  error // the decoder's error; the chunk's records precede it
}

// scanLive calls fn with every record of the live bucket, in key order.
// Decoding takes about half of a reopen's time, so a second goroutine
// decodes the next chunks while fn indexes this one: on two cores a large
// file opens in about half the time. fn may keep nothing of st.
func scanLive(live *bbolt.Bucket, fn func(k key, st *storagev1.TaskStatus) error) error {
	full := make(chan *liveChunk, 2)
	free := make(chan *liveChunk, 3)
	for range cap(free) {
		free <- &liveChunk{keys: make([]key, 0, scanChunk), sts: make([]storagev1.TaskStatus, scanChunk)}
	}
	stop := make(chan struct{})
	go decodeLive(live, full, free, stop)
	defer func() {
		// Wait for the decoder to be done with the transaction: after an
		// error the caller closes it, and the file may then be unmapped.
		close(stop)
		for range full {
		}
	}()
	for ch := range full {
		for i, k := range ch.keys {
			if err := fn(k, &ch.sts[i]); err != nil {
				return err
			}
		}
		if ch.err != nil {
			return ch.err
		}
		ch.keys = ch.keys[:0]
		free <- ch
	}
	return nil
}

// decodeLive walks the live bucket and sends its records, decoded, in
// chunks on full until the end (then closes full) or until stop.
func decodeLive(live *bbolt.Bucket, full chan<- *liveChunk, free <-chan *liveChunk, stop <-chan struct{}) {
	defer close(full)
	c := live.Cursor()
	kb, v := c.First()
	for kb != nil {
		var ch *liveChunk
		select {
		case <-stop:
			return
		default:
		}
		select {
		case ch = <-free:
		case <-stop:
			return
		}
		for ; kb != nil && len(ch.keys) < scanChunk; kb, v = c.Next() {
			var k key
			copy(k[:], kb)
			if err := proto.Unmarshal(v, &ch.sts[len(ch.keys)]); err != nil {
				ch.err = fmt.Errorf("status of %s: %w", k, err)
				kb = nil
				break
			}
			ch.keys = append(ch.keys, k)
		}
		select {
		case full <- ch:
		case <-stop:
			return
		}
	}
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
	// One table insert per task (at ten million tasks each is a cache
	// miss): a pending task's goes with its offer to the ready FIFO.
	if m.state == statePending && e.offerReadyLocked(k, m) {
		return
	}
	e.tasks.put(k, m)
	if m.state == stateAggr {
		e.joinGroupLocked(k, q, st.GetGroup(), st.GetType(), st.GetEnqueuedAt(), nanos(e.cfg.Now()))
	}
}
