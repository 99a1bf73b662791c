package bolt

import (
	"bytes"
	"fmt"
	"slices"

	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// txw is what an op sees: the transaction, its buckets, the live statuses
// the transaction has read or changed, and the per-queue count deltas of
// terminal tasks.
//
// Live statuses are decoded once per transaction and written back once, at
// the end: a task leased and completed within one group commit (common
// under load) costs one read and no rewrite of its live record, instead of
// a read-modify-write for each change.
type txw struct {
	tx                                                        *bbolt.Tx
	tasks, live, done, purge, ended, qrecs, index, dependents *bbolt.Bucket
	statuses                                                  map[key]*liveStatus
	changed                                                   []key                  // keys of changed statuses, in first-change order
	deltas                                                    map[string]*queueDelta // queue → changes to its record's counts
}

// queueDelta is what a transaction adds to a queue record's counts.
type queueDelta struct {
	completed, archived, canceled, processed, failed, enqueued, expired int64
}

// liveStatus is a live task's status as the transaction sees it.
type liveStatus struct {
	st      storagev1.TaskStatus
	orig    broker.State // the state in the file when the transaction read it
	changed bool
	gone    bool // moved to the done bucket
}

func newTxw(tx *bbolt.Tx) *txw {
	return &txw{
		tx:         tx,
		tasks:      tx.Bucket(bucketTasks),
		live:       tx.Bucket(bucketLive),
		done:       tx.Bucket(bucketDone),
		purge:      tx.Bucket(bucketPurge),
		ended:      tx.Bucket(bucketEnded),
		qrecs:      tx.Bucket(bucketQueues),
		index:      tx.Bucket(bucketIndex),
		dependents: tx.Bucket(bucketDependents),
	}
}

// runOps runs a batch's ops in tx. Every error it returns is an *opError:
// the ops found the file other than memory said (or could not write what
// memory decided), unlike a failure of the commit itself.
func runOps(tx *bbolt.Tx, ops []op) error {
	w := newTxw(tx)
	// Specs are written in id order and never rewritten: pack their pages.
	w.tasks.FillPercent = 0.95
	for _, o := range ops {
		if err := o(w); err != nil {
			return &opError{err}
		}
	}
	if err := w.flush(); err != nil {
		return &opError{err}
	}
	return nil
}

// opError is an error of an op inside a commit's transaction.
type opError struct{ err error }

func (e *opError) Error() string { return e.err.Error() }
func (e *opError) Unwrap() error { return e.err }

// flush writes the changed live statuses and the terminal counts.
func (w *txw) flush() error {
	for _, k := range w.changed {
		ls := w.statuses[k]
		if ls.gone {
			continue
		}
		if err := w.live.Put(k[:], marshal(&ls.st)); err != nil {
			return err
		}
		if err := w.reindex(k, &ls.st, ls.orig, stateOf(&ls.st)); err != nil {
			return err
		}
	}
	return w.flushDeltas()
}

// loadLive returns a live task's status for this transaction.
func (w *txw) loadLive(k key) (*liveStatus, error) {
	if ls, ok := w.statuses[k]; ok && !ls.gone {
		return ls, nil
	}
	v := w.live.Get(k[:])
	if v == nil {
		return nil, fmt.Errorf("live status of %s is missing", k)
	}
	ls := &liveStatus{}
	if err := proto.Unmarshal(v, &ls.st); err != nil {
		return nil, fmt.Errorf("status of %s: %w", k, err)
	}
	ls.orig = stateOf(&ls.st)
	if w.statuses == nil {
		w.statuses = make(map[key]*liveStatus)
	}
	w.statuses[k] = ls
	return ls, nil
}

// updateLive applies fn to a live task's status; the record is rewritten
// when the transaction ends.
func (w *txw) updateLive(k key, fn func(st *storagev1.TaskStatus)) error {
	ls, err := w.loadLive(k)
	if err != nil {
		return err
	}
	fn(&ls.st)
	if !ls.changed {
		ls.changed = true
		w.changed = append(w.changed, k)
	}
	return nil
}

// finish moves a live task's status to the done bucket in a terminal state
// and indexes it for purging: at purgeAt when it has its own retention
// (purgeAt != 0), else under its class by when it ended.
func (w *txw) finish(k key, purgeAt int64, fn func(st *storagev1.TaskStatus)) error {
	ls, err := w.loadLive(k)
	if err != nil {
		return err
	}
	st := &ls.st
	fn(st)
	st.PurgeAt = purgeAt
	ls.gone = true
	if err := w.live.Delete(k[:]); err != nil {
		return err
	}
	if err := w.done.Put(k[:], marshal(st)); err != nil {
		return err
	}
	if err := w.reindex(k, st, ls.orig, stateOf(st)); err != nil {
		return err
	}
	w.termDelta(st.GetQueue(), stateOf(st), 1)
	if purgeAt != 0 {
		return w.purge.Put(purgeKey(purgeAt, k), nil)
	}
	return w.ended.Put(endedKey(classOf(stateOf(st)), st.GetCompletedAt(), k), nil)
}

// reindex moves a task's entry in the listing index from state from to
// state to (from 0: a new entry; to 0: removed).
func (w *txw) reindex(k key, st *storagev1.TaskStatus, from, to broker.State) error {
	if from == to {
		return nil
	}
	if from != 0 {
		if err := w.index.Delete(indexKey(st.GetQueue(), from, st.GetType(), k)); err != nil {
			return err
		}
	}
	if to != 0 {
		return w.index.Put(indexKey(st.GetQueue(), to, st.GetType(), k), nil)
	}
	return nil
}

func (w *txw) delta(queue string) *queueDelta {
	if w.deltas == nil {
		w.deltas = map[string]*queueDelta{}
	}
	d := w.deltas[queue]
	if d == nil {
		d = &queueDelta{}
		w.deltas[queue] = d
	}
	return d
}

// termDelta adjusts the persisted count of terminal tasks in a queue.
func (w *txw) termDelta(queue string, state broker.State, n int64) {
	d := w.delta(queue)
	switch state {
	case stateCompleted:
		d.completed += n
	case stateArchived:
		d.archived += n
	case stateCanceled:
		d.canceled += n
	}
}

// countExpired adds a task archived for its expiry or deadline to a
// queue's persisted totals.
func (w *txw) countExpired(queue string) { w.delta(queue).expired++ }

// countAttempt adds an attempt that ended with a verdict to a queue's
// persisted totals.
func (w *txw) countAttempt(queue string, failed bool) {
	d := w.delta(queue)
	d.processed++
	if failed {
		d.failed++
	}
}

func (w *txw) flushDeltas() error {
	// In name order: bbolt inserts into one in-memory node until the
	// commit splits it, so keys put in order cost an append each, where
	// random order costs a copy of the node each.
	names := make([]string, 0, len(w.deltas))
	for name := range w.deltas {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		d := w.deltas[name]
		rec := &storagev1.QueueRecord{}
		if v := w.qrecs.Get([]byte(name)); v != nil {
			if err := proto.Unmarshal(v, rec); err != nil {
				return fmt.Errorf("queue record %q: %w", name, err)
			}
		}
		rec.Completed += d.completed
		rec.Archived += d.archived
		rec.Canceled += d.canceled
		rec.Processed += d.processed
		rec.Failed += d.failed
		rec.Enqueued += d.enqueued
		rec.Expired += d.expired
		if err := w.qrecs.Put([]byte(name), marshal(rec)); err != nil {
			return err
		}
	}
	return nil
}

// dropDependents deletes the dependents entries of task k (it is purged
// or deleted: nothing shows its dependents any more).
func (w *txw) dropDependents(k key) error {
	c := w.dependents.Cursor()
	var gone [][]byte
	for kb, _ := c.Seek(k[:]); kb != nil && bytes.HasPrefix(kb, k[:]); kb, _ = c.Next() {
		gone = append(gone, bytes.Clone(kb))
	}
	for _, kb := range gone {
		if err := w.dependents.Delete(kb); err != nil {
			return err
		}
	}
	return nil
}
