package bolt

import (
	"bytes"
	"context"
	"fmt"
	"sort"

	"github.com/oklog/ulid/v2"
	bbolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// This file reads a data file whole for a copy (and reads back a copy's
// new file, for its check): what the engine would rebuild from it on open.

// view runs fn in a read transaction, faults on damaged pages reported as
// errors naming the file.
func (s *CopyStore) view(fn func(tx *bbolt.Tx) error) error {
	return ReadGuarded(s.path, func() error { return s.db.View(fn) })
}

// CopyQueues lists the queues as the engine counts them on open: the
// queue records (pause flag, configuration, totals, and the terminal
// tasks' counts), and the live tasks per state.
func (s *CopyStore) CopyQueues(ctx context.Context) ([]broker.QueueInfo, error) {
	byName := map[string]*broker.QueueInfo{}
	queue := func(name string) *broker.QueueInfo {
		q := byName[name]
		if q == nil {
			q = &broker.QueueInfo{Name: name}
			byName[name] = q
		}
		return q
	}
	err := s.view(func(tx *bbolt.Tx) error {
		qb, live := tx.Bucket(bucketQueues), tx.Bucket(bucketLive)
		if qb == nil || live == nil {
			return nil
		}
		if err := qb.ForEach(func(name, v []byte) error {
			rec := &storagev1.QueueRecord{}
			if err := proto.Unmarshal(v, rec); err != nil {
				return fmt.Errorf("queue record %q: %w", name, err)
			}
			q := queue(string(name))
			q.Paused, q.Config = rec.GetPaused(), queueConfigOf(rec)
			q.Enqueued, q.Processed, q.Failed, q.Expired = rec.GetEnqueued(), rec.GetProcessed(), rec.GetFailed(), rec.GetExpired()
			q.Counts[stateCompleted] = rec.GetCompleted()
			q.Counts[stateArchived] = rec.GetArchived()
			q.Counts[stateCanceled] = rec.GetCanceled()
			return nil
		}); err != nil {
			return err
		}
		var r liveRecord
		c := live.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if err := r.decode(v); err != nil {
				return fmt.Errorf("status of %x: %w", k, err)
			}
			if !r.State().Valid() {
				return fmt.Errorf("status of %x: state %d is not a state", k, r.state)
			}
			q := byName[string(r.queue)]
			if q == nil {
				q = queue(string(r.queue))
			}
			q.Counts[r.State()]++
		}
		return ctx.Err()
	})
	if err != nil {
		return nil, err
	}
	out := make([]broker.QueueInfo, 0, len(byName))
	for _, q := range byName {
		out = append(out, *q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// CopyCrons lists the cron entries, by id.
func (s *CopyStore) CopyCrons(context.Context) ([]broker.CronEntry, error) {
	var out []broker.CronEntry
	err := s.view(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketCron)
		if b == nil {
			return nil
		}
		return b.ForEach(func(id, v []byte) error {
			rec := &storagev1.CronRecord{}
			if err := proto.Unmarshal(v, rec); err != nil {
				return fmt.Errorf("cron entry %q: %w", id, err)
			}
			out = append(out, cronEntry(string(id), rec))
			return nil
		})
	})
	return out, err
}

// CopyTasks calls fn with every task, in id order, from one read
// transaction: its spec and its status (live or terminal), read side by
// side in key order. A spec without a status is no task (GetTask does not
// find it) and is skipped.
func (s *CopyStore) CopyTasks(ctx context.Context, fn func(t *broker.CopyTask) error) error {
	return s.view(func(tx *bbolt.Tx) error {
		specs := tx.Bucket(bucketTasks)
		if specs == nil {
			return nil
		}
		lc, dc := tx.Bucket(bucketLive).Cursor(), tx.Bucket(bucketDone).Cursor()
		lk, lv := lc.First()
		dk, dv := dc.First()
		c := specs.Cursor()
		for kb, sv := c.First(); kb != nil; kb, sv = c.Next() {
			for lk != nil && bytes.Compare(lk, kb) < 0 {
				lk, lv = lc.Next()
			}
			for dk != nil && bytes.Compare(dk, kb) < 0 {
				dk, dv = dc.Next()
			}
			var stv []byte
			switch {
			case bytes.Equal(lk, kb):
				stv = lv
			case bytes.Equal(dk, kb):
				stv = dv
			default:
				continue
			}
			if len(kb) != len(key{}) {
				return fmt.Errorf("task key %x is not a binary ULID", kb)
			}
			var k key
			copy(k[:], kb)
			t, err := copyTaskOf(k, sv, stv)
			if err != nil {
				return err
			}
			if err := fn(t); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		return nil
	})
}

// copyTaskOf decodes a task's stored records (the decoded values are
// copies: they outlive the transaction).
func copyTaskOf(k key, sv, stv []byte) (*broker.CopyTask, error) {
	spec := &storagev1.TaskSpec{}
	st := &storagev1.TaskStatus{}
	if err := proto.Unmarshal(sv, spec); err != nil {
		return nil, fmt.Errorf("spec of %s: %w", k, err)
	}
	if err := proto.Unmarshal(stv, st); err != nil {
		return nil, fmt.Errorf("status of %s: %w", k, err)
	}
	t := &broker.CopyTask{Task: *taskFrom(k, spec, st), UniqueUntil: fromNanos(st.GetUniqueUntil()),
		CancelRequested: st.GetCancelRequested(), StartAuthorized: st.GetStartAuthorized()}
	switch s := t.State; {
	case s == stateBlocked:
		t.DependencyFailed = st.GetDependencyFailed()
		for _, d := range st.GetWaitingOn() {
			var id ulid.ULID
			copy(id[:], d.GetTaskId())
			t.WaitingOn = append(t.WaitingOn, broker.Dependency{TaskID: id.String(), OnFailure: broker.OnFailure(d.GetOnFailure())})
		}
	case s.Terminal():
		t.PurgeAt = fromNanos(st.GetPurgeAt())
	}
	return t, nil
}
