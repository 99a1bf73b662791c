package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/oklog/ulid/v2"
	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// This file writes a copy's new file: every record an engine writes for a
// task (its spec and status, its listing index entry, its purge index
// entry, its dependents entries), the queue records and the cron entries.
// The in-memory indexes are not written: the engine rebuilds them from
// the file on open, as after any restart (an ACTIVE task becomes PENDING
// then, with no retry counted).

// errNotTarget is the error of a load into a store opened as a source.
var errNotTarget = errors.New("bolt: a store opened as a copy's source is read-only")

// LoadQueues keeps the queues for Seal, which writes their records with
// the terminal tasks' counts.
func (s *CopyStore) LoadQueues(_ context.Context, queues []broker.QueueInfo) error {
	if s.lock == nil {
		return errNotTarget
	}
	s.queues = append(s.queues, queues...)
	return nil
}

// LoadTasks writes a batch of tasks in one transaction.
func (s *CopyStore) LoadTasks(_ context.Context, tasks []*broker.CopyTask) error {
	if s.lock == nil {
		return errNotTarget
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		w := newTxw(tx)
		// Specs and statuses come in id order: pack their pages.
		w.tasks.FillPercent, w.done.FillPercent = 0.95, 0.95
		var ks indexKeys
		for _, t := range tasks {
			if err := s.putTask(w, t, &ks); err != nil {
				return err
			}
		}
		// Each index in key order: bbolt puts a run of rising keys into
		// a node at the cost of appends.
		for _, set := range []struct {
			b    *bbolt.Bucket
			keys [][]byte
		}{{w.index, ks.index}, {w.purge, ks.purge}, {w.ended, ks.ended}, {w.dependents, ks.dependents}} {
			slices.SortFunc(set.keys, bytes.Compare)
			for _, kb := range set.keys {
				if err := set.b.Put(kb, nil); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// indexKeys are the index entries of a batch of tasks, put once sorted.
type indexKeys struct{ index, purge, ended, dependents [][]byte }

// putTask writes a task's spec and status (live or terminal), and adds its
// entries to ks: the listing index, the purge index of a terminal task
// (by its own purge time, or by its class and end), who it depends on.
func (s *CopyStore) putTask(w *txw, t *broker.CopyTask, ks *indexKeys) error {
	k, err := s.nextKey(t.ID)
	if err != nil {
		return err
	}
	spec, st, err := recordsOf(t)
	if err != nil {
		return fmt.Errorf("task %s: %w", t.ID, err)
	}
	sb, err := encode(spec)
	if err != nil {
		return fmt.Errorf("task %s: %w", t.ID, err)
	}
	stb, err := encode(st)
	if err != nil {
		return fmt.Errorf("task %s: %w", t.ID, err)
	}
	statuses := w.live
	if t.State.Terminal() {
		statuses = w.done
	}
	if err := w.tasks.Put(k[:], sb); err != nil {
		return err
	}
	if err := statuses.Put(k[:], stb); err != nil {
		return err
	}
	s.named[t.Queue] = struct{}{}
	ks.index = append(ks.index, indexKey(t.Queue, t.State, t.Type, k))
	for _, d := range spec.GetDependsOn() {
		ks.dependents = append(ks.dependents, append(bytes.Clone(d.GetTaskId()), k[:]...))
	}
	switch {
	case !t.State.Terminal():
	case st.GetPurgeAt() != 0:
		s.countTerminal(t.Queue, t.State)
		ks.purge = append(ks.purge, purgeKey(st.GetPurgeAt(), k))
	default:
		s.countTerminal(t.Queue, t.State)
		ks.ended = append(ks.ended, endedKey(classOf(t.State), st.GetCompletedAt(), k))
	}
	return nil
}

// nextKey is a task's key, which must follow the previous one's: tasks
// come in id order, each once.
func (s *CopyStore) nextKey(id string) (key, error) {
	k, err := ulid.ParseStrict(id)
	if err != nil {
		return key{}, fmt.Errorf("task id %q is not a ULID (the embedded engine keys tasks by ULID)", id)
	}
	if k.Compare(s.lastKey) <= 0 {
		return key{}, fmt.Errorf("task %s comes after task %s: a copy's tasks come in id order, each once", k, s.lastKey)
	}
	s.lastKey = k
	return k, nil
}

func (s *CopyStore) countTerminal(queue string, st broker.State) {
	c := s.terminal[queue]
	if c == nil {
		c = &[3]int64{}
		s.terminal[queue] = c
	}
	switch st {
	case stateCompleted:
		c[0]++
	case stateArchived:
		c[1]++
	default:
		c[2]++
	}
}

// recordsOf is a task's spec and status as the engine stores them. A
// live task must be one the engine's open accepts (checkLiveStatus).
func recordsOf(t *broker.CopyTask) (*storagev1.TaskSpec, *storagev1.TaskStatus, error) {
	if !t.State.Valid() {
		return nil, nil, fmt.Errorf("state %d is not a state", t.State)
	}
	if t.Queue == "" {
		return nil, nil, errors.New("no queue")
	}
	if !t.State.Terminal() && (t.Priority < 1 || t.Priority > 9) {
		return nil, nil, fmt.Errorf("priority %d is not 1..9", t.Priority)
	}
	spec := &storagev1.TaskSpec{Queue: t.Queue, Type: t.Type, Payload: t.Payload, ContentType: t.ContentType,
		Metadata: t.Metadata, Options: t.Options, Timeout: int64(t.Timeout), Deadline: nanos(t.Deadline)}
	if p := t.RetryPolicy; p != nil {
		spec.RetryPolicy = &storagev1.RetryPolicyRecord{Strategy: int32(p.Strategy), Base: int64(p.Base), Max: int64(p.Max)}
	}
	var err error
	if spec.DependsOn, err = depRecords(t.DependsOn); err != nil {
		return nil, nil, fmt.Errorf("depends_on: %w", err)
	}
	st := &storagev1.TaskStatus{
		State: int32(t.State), Queue: t.Queue, Type: t.Type, Priority: t.Priority, Retried: t.Retried, MaxRetry: t.MaxRetry,
		EnqueuedAt: nanos(t.EnqueuedAt), NextProcessAt: nanos(t.NextProcessAt), StartedAt: nanos(t.StartedAt),
		CompletedAt: nanos(t.CompletedAt), LastError: t.LastError, Result: t.Result,
		ProgressPercent: t.ProgressPercent, ProgressMessage: t.ProgressMessage,
		UniqueKey: t.UniqueKey, UniqueUntil: nanos(t.UniqueUntil), ExpiresAt: nanos(t.ExpiresAt), Deadline: nanos(t.Deadline),
		Group: t.Group, ConcurrencyKey: t.ConcurrencyKey, CancelRequested: t.CancelRequested,
		AtMostOnce: t.AtMostOnce, StartAuthorized: t.StartAuthorized && t.State == stateActive,
	}
	if t.Retention != nil {
		r := int64(*t.Retention)
		st.Retention = &r
	}
	for _, e := range t.Errors {
		st.Errors = append(st.Errors, &storagev1.AttemptErrorRecord{Attempt: e.Attempt, Message: e.Message, At: nanos(e.At)})
	}
	switch {
	case t.State == stateBlocked:
		st.DependencyFailed = t.DependencyFailed
		if st.WaitingOn, err = depRecords(t.WaitingOn); err != nil {
			return nil, nil, fmt.Errorf("waiting on: %w", err)
		}
	case t.State.Terminal():
		st.PurgeAt = nanos(t.PurgeAt)
	}
	return spec, st, nil
}

// encode is m's encoding, or why it has none: a string of the source
// that is not UTF-8 (the records' strings must be).
func encode(m proto.Message) ([]byte, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("cannot be stored: %w", err)
	}
	return b, nil
}

// depRecords is a list of dependencies as stored.
func depRecords(deps []broker.Dependency) ([]*storagev1.DependencyRecord, error) {
	var out []*storagev1.DependencyRecord
	for _, d := range deps {
		k, err := ulid.ParseStrict(d.TaskID)
		if err != nil {
			return nil, fmt.Errorf("task id %q is not a ULID", d.TaskID)
		}
		out = append(out, &storagev1.DependencyRecord{TaskId: k[:], OnFailure: int32(d.OnFailure)})
	}
	return out, nil
}

// LoadCrons writes the cron entries, run history included.
func (s *CopyStore) LoadCrons(_ context.Context, crons []broker.CronEntry) error {
	if s.lock == nil {
		return errNotTarget
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketCron)
		for _, c := range crons {
			if c.ID == "" {
				return errors.New("a cron entry without an id")
			}
			rec := cronRecord(c)
			rec.LastRun, rec.LastFire, rec.LastTaskId, rec.LastError = nanos(c.LastRun), nanos(c.LastFire), c.LastTaskID, c.LastError
			v, err := encode(rec)
			if err != nil {
				return fmt.Errorf("cron entry %q: %w", c.ID, err)
			}
			if err := b.Put([]byte(c.ID), v); err != nil {
				return err
			}
		}
		return nil
	})
}

// Seal writes the queue records: each queue's pause flag, configuration
// and totals, and the counts of its terminal tasks, which the engine reads
// from there on open instead of scanning them. A queue that only its tasks
// name gets a record too (a queue is known from its first task on).
func (s *CopyStore) Seal(context.Context) error {
	if s.lock == nil {
		return errNotTarget
	}
	recs := map[string]*storagev1.QueueRecord{}
	for _, q := range s.queues {
		rec := &storagev1.QueueRecord{Paused: q.Paused, Processed: q.Processed, Failed: q.Failed, Enqueued: q.Enqueued,
			Expired: q.Expired}
		setQueueConfig(rec, q.Config)
		recs[q.Name] = rec
	}
	for name, c := range s.terminal {
		rec := recs[name]
		if rec == nil {
			rec = &storagev1.QueueRecord{}
			recs[name] = rec
		}
		rec.Completed, rec.Archived, rec.Canceled = c[0], c[1], c[2]
	}
	for name := range s.named {
		if recs[name] == nil {
			recs[name] = &storagev1.QueueRecord{}
		}
	}
	names := slices.Sorted(maps.Keys(recs))
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketQueues)
		for _, name := range names {
			if name == "" {
				return errors.New("a queue without a name")
			}
			if err := b.Put([]byte(name), marshal(recs[name])); err != nil {
				return err
			}
		}
		return nil
	})
	return err
}
