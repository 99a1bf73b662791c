package bolt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// Cron entries live in the "cron" bucket and, all of them, in memory
// (Engine.crons): they are few, and FireCron decides under the engine lock
// whether a fire was applied already.

var bucketCron = []byte("cron") // id → CronRecord

func cronEntry(id string, r *storagev1.CronRecord) broker.CronEntry {
	return broker.CronEntry{
		ID: id, Spec: r.GetSpec(), Queue: r.GetQueue(), Type: r.GetType(), Payload: r.GetPayload(),
		ContentType: r.GetContentType(), Metadata: r.GetMetadata(), Options: r.GetOptions(), Paused: r.GetPaused(),
		NextRun: fromNanos(r.GetNextRun()), LastRun: fromNanos(r.GetLastRun()), LastFire: fromNanos(r.GetLastFire()),
		LastTaskID: r.GetLastTaskId(), LastError: r.GetLastError(),
	}
}

// putCronLocked stores rec under id, in memory now and in the next commit.
func (e *Engine) putCronLocked(id string, rec *storagev1.CronRecord) *batch {
	e.crons[id] = rec
	b := marshal(rec)
	return e.commit.appendSyncLocked(func(w *txw) error { return w.tx.Bucket(bucketCron).Put([]byte(id), b) }, nil)
}

// cronChangedLocked stores (or, rec nil, deletes) an entry an operator
// changed, and tells the scheduler.
func (e *Engine) cronChangedLocked(id string, rec *storagev1.CronRecord) *batch {
	defer e.note.CronsChanged()
	if rec != nil {
		return e.putCronLocked(id, rec)
	}
	delete(e.crons, id)
	return e.commit.appendSyncLocked(func(w *txw) error { return w.tx.Bucket(bucketCron).Delete([]byte(id)) }, nil)
}

// CreateCron stores a new entry; see broker.Broker.
func (e *Engine) CreateCron(ctx context.Context, c broker.CronEntry) (broker.CronEntry, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return broker.CronEntry{}, errClosed
	}
	if _, exists := e.crons[c.ID]; exists {
		e.mu.Unlock()
		return broker.CronEntry{}, fmt.Errorf("cron entry %q: %w", c.ID, broker.ErrAlreadyExists)
	}
	rec := cronRecord(c)
	b := e.cronChangedLocked(c.ID, rec)
	e.mu.Unlock()
	if err := e.commit.wait(ctx, b); err != nil {
		return broker.CronEntry{}, err
	}
	return cronEntry(c.ID, rec), nil
}

// UpdateCron changes an entry in one step; see broker.Broker.
func (e *Engine) UpdateCron(ctx context.Context, id string, update func(broker.CronEntry) (broker.CronEntry, error)) (broker.CronEntry, error) {
	rec, b, err := e.updateCron(id, update)
	if err != nil {
		return broker.CronEntry{}, err
	}
	if err := e.commit.wait(ctx, b); err != nil {
		return broker.CronEntry{}, err
	}
	return cronEntry(id, rec), nil
}

// updateCron applies update to the stored entry and queues the result for
// the next commit, under the engine lock. update is the caller's code: the
// lock is released even if it panics.
func (e *Engine) updateCron(id string, update func(broker.CronEntry) (broker.CronEntry, error)) (*storagev1.CronRecord, *batch, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, nil, errClosed
	}
	old, ok := e.crons[id]
	if !ok {
		return nil, nil, fmt.Errorf("cron entry %q: %w", id, broker.ErrNotFound)
	}
	// A copy: update may change what it is given, and it must not change
	// the entry in memory before (or unless) the result is stored.
	c, err := update(cronEntry(id, proto.CloneOf(old)))
	if err != nil {
		return nil, nil, err
	}
	rec := cronRecord(c)
	rec.LastRun, rec.LastFire, rec.LastTaskId = old.GetLastRun(), old.GetLastFire(), old.GetLastTaskId()
	rec.LastError = old.GetLastError()
	return rec, e.cronChangedLocked(id, rec), nil
}

// cronRecord is c's user fields and next run as stored, without its run
// history (the engine's to keep).
func cronRecord(c broker.CronEntry) *storagev1.CronRecord {
	return &storagev1.CronRecord{Spec: c.Spec, Queue: c.Queue, Type: c.Type, Payload: c.Payload,
		ContentType: c.ContentType, Metadata: c.Metadata, Options: c.Options, Paused: c.Paused, NextRun: nanos(c.NextRun)}
}

// Cron returns an entry; see broker.Broker.
func (e *Engine) Cron(_ context.Context, id string) (broker.CronEntry, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	rec, ok := e.crons[id]
	if !ok {
		return broker.CronEntry{}, fmt.Errorf("cron entry %q: %w", id, broker.ErrNotFound)
	}
	return cronEntry(id, rec), nil
}

// Crons lists the entries; see broker.Broker.
func (e *Engine) Crons(context.Context) ([]broker.CronEntry, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]broker.CronEntry, 0, len(e.crons))
	for id, rec := range e.crons {
		out = append(out, cronEntry(id, rec))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// DeleteCron removes an entry; see broker.Broker.
func (e *Engine) DeleteCron(ctx context.Context, id string) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errClosed
	}
	if _, ok := e.crons[id]; !ok {
		e.mu.Unlock()
		return fmt.Errorf("cron entry %q: %w", id, broker.ErrNotFound)
	}
	b := e.cronChangedLocked(id, nil)
	e.mu.Unlock()
	return e.commit.wait(ctx, b)
}

// cronTemplateIs says whether rec's spec and task template are c's.
func cronTemplateIs(rec *storagev1.CronRecord, c *broker.CronEntry) bool {
	return rec.GetSpec() == c.Spec && rec.GetQueue() == c.Queue && rec.GetType() == c.Type &&
		bytes.Equal(rec.GetPayload(), c.Payload) && rec.GetContentType() == c.ContentType &&
		maps.Equal(rec.GetMetadata(), c.Metadata) && bytes.Equal(rec.GetOptions(), c.Options)
}

// FireCron applies a scheduled fire; see broker.Broker. The fire's record
// and its task's insert share one commit: after a crash either both are
// there or neither is, and the fire time on the entry refuses the fire a
// second time.
func (e *Engine) FireCron(ctx context.Context, f broker.CronFire) (*broker.Task, error) {
	var pend []pendingTask
	if !f.Skip {
		pend = prepare([]broker.NewTask{f.Task}, f.Now.UnixNano())
	}
	for {
		task, again, err := e.fireCronOnce(ctx, f, pend)
		if !again {
			return task, err
		}
	}
}

// fireCronOnce is one try of FireCron. again is set when the fire's task
// conflicts (by its unique key) with a task whose enqueue is not durable
// yet: nothing was changed, and the fire is tried again once that commit
// ends, as Enqueue does, so that it is refused only by a task that is
// stored and never reports a task it did not store.
func (e *Engine) fireCronOnce(ctx context.Context, f broker.CronFire, pend []pendingTask) (*broker.Task, bool, error) {
	lookup, err := e.lockForEnqueue(ctx, pend, false)
	if err != nil {
		return nil, false, err
	}
	old, ok := e.crons[f.ID]
	switch {
	case !ok:
		e.mu.Unlock()
		return nil, false, fmt.Errorf("cron entry %q: %w", f.ID, broker.ErrNotFound)
	case old.GetPaused():
		e.mu.Unlock()
		return nil, false, fmt.Errorf("cron entry %q is paused: %w", f.ID, broker.ErrInvalidState)
	case old.GetNextRun() != nanos(f.FireAt) || !f.Skip && old.GetLastFire() >= nanos(f.FireAt),
		f.Entry != nil && !cronTemplateIs(old, f.Entry):
		e.mu.Unlock()
		return nil, false, fmt.Errorf("cron entry %q at %s: %w", f.ID, f.FireAt.UTC().Format(time.RFC3339), broker.ErrAlreadyFired)
	}
	rec := proto.CloneOf(old)
	rec.LastFire, rec.NextRun = max(rec.GetLastFire(), nanos(f.FireAt)), nanos(f.Next)
	if f.Skip {
		b := e.putCronLocked(f.ID, rec)
		e.mu.Unlock()
		return nil, false, e.commit.wait(ctx, b)
	}
	b := e.enqueueLocked(pend, f.Now, lookup)
	pt := &pend[0]
	if pt.wait {
		pt.wait = false
		holder := e.commit.syncPointLocked()
		e.mu.Unlock()
		if holder == nil { // cannot be: a task not durable is in a batch
			return nil, false, errors.New("bolt: a task not durable yet is in no batch")
		}
		if werr := e.commit.wait(ctx, holder); ctx.Err() != nil {
			return nil, false, werr
		}
		return nil, true, nil
	}
	rec.LastRun = nanos(f.Now)
	if pt.err == nil {
		rec.LastTaskId, rec.LastError = pt.k.String(), ""
	} else {
		rec.LastError = pt.err.Error()
	}
	if cb := e.putCronLocked(f.ID, rec); b == nil {
		b = cb
	}
	e.mu.Unlock()
	if err := e.commit.wait(ctx, b); err != nil {
		return nil, false, err
	}
	if pt.err != nil {
		return nil, false, pt.err
	}
	return newTaskView(pt), false, nil
}
