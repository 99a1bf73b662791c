package bolt

import (
	"encoding/binary"
	"errors"
	"fmt"

	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// load creates the buckets of a new file, checks the schema version of an
// existing one and rebuilds every in-memory index from it.
func (e *Engine) load() error {
	err := e.db.Update(func(tx *bbolt.Tx) error {
		for _, name := range allBuckets {
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
	e.tasks = e.newTasksTable(0)
	e.queues, e.freeQueues = nil, nil
	e.byName = make(map[string]*queue)
	e.kinds, e.kindIDs = nil, make(map[broker.Kind]kindID)
	e.leases = make(map[key]*lease)
	e.unique = make(map[string]uniqueClaim)
	e.uniqOf = make(map[key]string)
	e.expires = make(map[key]int64)
	e.ranPastExpiry = make(map[key]struct{})
	e.retention = make(map[key]int64)
	e.ckeys = make(map[ckeyID]*ckey)
	e.rateWaits = make(map[*queue]struct{})
	e.keyOf = make(map[key]*ckey)
	e.settling = make(map[key]settled)
	e.deps = make(map[key][]depEdge)
	e.depGen = make(map[key]uint32)
	e.depEndedAt = make(map[key]int64)
	e.openGroups = make(map[groupID]*group)
	e.memberGen = make(map[key]memberOf)
	e.crons = make(map[string]*storagev1.CronRecord)
	e.releases = make(map[string]*storagev1.ReleaseRecord)
	e.groupHeap = nil
	e.dueHeap, e.expHeap, e.leaseHeap, e.dueCheckAt = timedIndex{}, timedIndex{}, nil, compactSlack
	e.purgeNext, e.endedFirst = 0, [numClasses]int64{}
	e.purging = 0

	var wasActive, wasCanceled, wasStarted, wasPushed []key
	err := e.db.View(func(tx *bbolt.Tx) error {
		// Memory is rebuilt from this transaction: reads begun before it
		// are not current (see Engine.currentLocked).
		e.commit.applied = uint64(tx.ID())
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
			q.expired = rec.GetExpired()
			q.cfg = queueConfigOf(rec)
			return nil
		}); err != nil {
			return err
		}
		if err := tx.Bucket(bucketReleases).ForEach(func(id, v []byte) error {
			rec := &storagev1.ReleaseRecord{}
			if err := proto.Unmarshal(v, rec); err != nil {
				return fmt.Errorf("release record %q: %w", id, err)
			}
			e.releases[string(id)] = rec
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
		live, specs := tx.Bucket(bucketLive), tx.Bucket(bucketTasks)
		// Size the table once, instead of growing it through the scan.
		e.tasks.free()
		e.tasks = e.newTasksTable(live.Stats().KeyN)
		err := scanLive(live, e.tasks.touch, func(k key, r *liveRecord) error {
			if err := checkLiveStatus(r); err != nil {
				return fmt.Errorf("status of %s: %w", k, err)
			}
			if r.State() == stateActive {
				if r.cancelRequested {
					// Canceled while it ran, and its worker is gone: it
					// is finished as canceled below, once every task is
					// indexed.
					wasCanceled = append(wasCanceled, k)
				} else if r.startAuthorized {
					// An at-most-once attempt that may have run: its
					// outcome is unknown, and it is not run again.
					wasStarted = append(wasStarted, k)
				} else if r.pushInvoked {
					// Sent to a push endpoint, which may have run it:
					// the attempt counts.
					wasPushed = append(wasPushed, k)
				} else {
					wasActive = append(wasActive, k)
				}
				r.state = int32(statePending)
			}
			e.indexLiveLocked(k, r, specs)
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
	e.reloadedBoundsLocked()
	if len(wasActive)+len(wasCanceled)+len(wasStarted)+len(wasPushed) > 0 {
		now := nanos(e.cfg.Now())
		// A task canceled while it ran is finished as any cancel is, which
		// also resolves its dependents; its changes go into the
		// transaction below rather than to the committer.
		open := e.commit.open
		e.commit.open = newBatch()
		for _, k := range wasCanceled {
			if m, ok := e.tasks.get(k); ok {
				e.finishLocked(k, m, stateCanceled, now, nil)
			}
		}
		for _, k := range wasStarted {
			if m, ok := e.tasks.get(k); ok {
				e.outcomeUnknownLocked(k, m, now)
			}
		}
		for _, k := range wasPushed {
			if m, ok := e.tasks.get(k); ok {
				e.interruptedPushLocked(k, m, now)
			}
		}
		canceled := e.commit.open
		e.commit.open = open
		err = e.db.Update(func(tx *bbolt.Tx) error {
			e.commit.applied = uint64(tx.ID())
			w := newTxw(tx)
			for _, k := range wasActive {
				if err := w.updateLive(k, func(st *storagev1.TaskStatus) { st.State = int32(statePending) }); err != nil {
					return err
				}
			}
			for _, o := range canceled.ops {
				if err := o(w); err != nil {
					return err
				}
			}
			return w.flush()
		})
		if err != nil {
			return fmt.Errorf("release tasks that were active: %w", err)
		}
		for _, f := range canceled.post {
			f()
		}
		e.log.Info("released tasks that were active when the file was closed", "count", len(wasActive),
			"canceled", len(wasCanceled), "outcome_unknown", len(wasStarted), "push_attempts_counted", len(wasPushed))
	}
	return nil
}

// checkLiveStatus refuses a live record the indexes cannot hold: a file
// damaged or written by something else than this engine. Open then fails,
// naming the task, rather than indexing out of range or losing the task.
func checkLiveStatus(r *liveRecord) error {
	if s := r.State(); !s.Waiting() && s != stateActive {
		return fmt.Errorf("state %d is not a live state", s)
	}
	if p := r.priority; p < 1 || p > 9 {
		return fmt.Errorf("priority %d is not 1..9", p)
	}
	if len(r.queue) == 0 {
		return errors.New("no queue")
	}
	return nil
}

// indexLiveLocked adds one durable live task to the in-memory indexes
// (specs is the bucket of stored specs, read for the size of a group's
// members only).
func (e *Engine) indexLiveLocked(k key, r *liveRecord, specs *bbolt.Bucket) {
	q := e.byName[string(r.queue)] // no copy of the name for the lookup
	if q == nil {
		q = e.queueLocked(string(r.queue))
	}
	m := meta{
		due:      r.nextProcessAt,
		queue:    q.index,
		retried:  r.retried,
		maxRetry: r.maxRetry,
		state:    r.State(),
		prio:     uint8(r.priority),
		flags:    flagCommitted,
		kind:     e.kindLocked(string(r.typ), r.atMostOnce),
	}
	q.counts[m.state]++
	switch m.state {
	case stateScheduled, stateRetry:
		e.dueHeap.add(timed{at: m.due, k: k})
	case statePending:
		m.due = 0 // when it became pending is not stored; next_process_at may be later (RunTask)
	}
	if r.rare {
		e.indexRareLocked(k, q, &m, r)
	}
	// One table insert per task (at ten million tasks each is a cache
	// miss): a pending task's goes with its offer to the ready FIFO.
	if m.state == statePending && e.offerReadyLocked(k, m) {
		return
	}
	e.tasks.put(k, m)
	if m.state == stateAggr {
		// A member released by its dependencies joined when released
		// (its next_process_at), any other when enqueued.
		joined := max(r.enqueuedAt, r.nextProcessAt)
		e.joinGroupLocked(k, q, string(r.group), string(r.typ), len(specs.Get(k[:])), joined, nanos(e.cfg.Now()))
	}
}

// indexRareLocked indexes what only some tasks have: a concurrency key, a
// unique key, a retention, an expiry or deadline, dependencies.
func (e *Engine) indexRareLocked(k key, q *queue, m *meta, r *liveRecord) {
	if len(r.concurrencyKey) > 0 {
		e.keyOf[k] = e.ckeyLocked(q, string(r.concurrencyKey))
	}
	if len(r.uniqueKey) > 0 {
		uk := string(r.uniqueKey)
		c := uniqueClaim{k: k, until: r.uniqueUntil, since: r.enqueuedAt}
		if old, ok := e.unique[uk]; !ok || c.outlasts(old) {
			e.unique[uk] = c
		}
		e.uniqOf[k] = uk
	}
	if r.hasRetention {
		e.retention[k] = r.retention
	}
	e.indexExpiryLocked(k, m, r.expiresAt, r.deadline)
	if m.state == stateBlocked {
		gen := e.newDepGenLocked(k, len(r.waitingOn))
		for _, d := range r.waitingOn {
			e.addDepEdgeLocked(k, gen, d.taskID, d.onFailure, releaseState(len(r.group) > 0, r.nextProcessAt, r.enqueuedAt))
		}
		m.waiting = uint16(len(r.waitingOn))
		if r.dependencyFailed {
			m.flags |= flagDepFailed
		}
	}
}

// outlasts reports whether claim c, rather than old, holds their key
// after a reopen. Several live tasks may name one key when earlier claims
// ran out of TTL. A claim is granted (at enqueue, or by RunTask, which the
// file does not date) only once every other live claim on the key has
// run out, so at most one of them can still hold: the one that runs out
// last (until 0: never, while its task is live). That one is the holder,
// whatever order the scan (by id, which a producer may choose) meets them
// in; when none holds any more, which is chosen does not matter.
func (c uniqueClaim) outlasts(old uniqueClaim) bool {
	switch {
	case (c.until == 0) != (old.until == 0):
		return c.until == 0
	case c.until != old.until:
		return c.until > old.until
	case c.since != old.since:
		return c.since > old.since
	}
	return c.k.Compare(old.k) > 0
}
