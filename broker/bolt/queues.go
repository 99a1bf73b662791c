package bolt

import (
	"context"
	"fmt"
	"sort"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// Queues lists every known queue; see broker.Broker.
func (e *Engine) Queues(context.Context) ([]broker.QueueInfo, error) {
	e.mu.Lock()
	out := make([]broker.QueueInfo, 0, len(e.queues))
	for _, q := range e.byName {
		out = append(out, q.info())
	}
	e.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Queue describes one queue; see broker.Broker.
func (e *Engine) Queue(_ context.Context, name string) (broker.QueueInfo, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return broker.QueueInfo{}, errClosed
	}
	if q := e.byName[name]; q != nil {
		return q.info(), nil
	}
	return broker.QueueInfo{Name: name}, nil
}

// SetQueuePaused pauses or resumes a queue, durably; see broker.Broker.
func (e *Engine) SetQueuePaused(ctx context.Context, name string, paused bool) (broker.QueueInfo, error) {
	return e.changeQueue(ctx, name, func(q *queue) {
		q.paused = paused
	}, func(rec *storagev1.QueueRecord) { rec.Paused = paused })
}

// UpdateQueueConfig changes a queue's configuration, durably; see
// broker.Broker.
func (e *Engine) UpdateQueueConfig(ctx context.Context, name string, update func(*broker.QueueConfig)) (broker.QueueInfo, error) {
	var cfg broker.QueueConfig
	return e.changeQueue(ctx, name, func(q *queue) {
		old := q.cfg
		cfg = q.cfg
		update(&cfg)
		q.cfg = cfg
		e.configChangedLocked(q, old)
		e.boundChangedLocked(q, old.MaxWaiting)
	}, func(rec *storagev1.QueueRecord) { setQueueConfig(rec, cfg) })
}

// changeQueue applies change to a queue in memory and record to its
// durable record, in the same critical section, creating the queue if
// needed, and waits for the record to be durable. A queue that has ready
// work or fired groups after the change is signalled (a resume, a raised
// limit).
func (e *Engine) changeQueue(ctx context.Context, name string, change func(q *queue), record func(rec *storagev1.QueueRecord)) (broker.QueueInfo, error) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return broker.QueueInfo{}, errClosed
	}
	if err := e.checkQueueLocked(name); err != nil {
		e.mu.Unlock()
		return broker.QueueInfo{}, err
	}
	q := e.queueLocked(name)
	change(q)
	b := e.commit.appendSyncLocked(func(w *txw) error {
		rec := &storagev1.QueueRecord{}
		if v := w.qrecs.Get([]byte(name)); v != nil {
			if err := proto.Unmarshal(v, rec); err != nil {
				return fmt.Errorf("queue record %q: %w", name, err)
			}
		}
		record(rec)
		return w.qrecs.Put([]byte(name), marshal(rec))
	}, nil)
	if e.dispatchableLocked(q, e.cfg.Now()) > 0 || q.fired.len() > 0 && !q.paused {
		e.note.TasksReady(name)
	}
	info := q.info()
	e.mu.Unlock()
	if err := e.commit.wait(ctx, b); err != nil {
		return broker.QueueInfo{}, err
	}
	return info, nil
}

// queueConfigOf reads a queue's configuration from its record.
func queueConfigOf(rec *storagev1.QueueRecord) broker.QueueConfig {
	return broker.QueueConfig{
		ConcurrencyLimit: rec.GetConcurrencyLimit(),
		MaxActive:        rec.GetMaxActive(),
		RatePerSecond:    rec.GetRatePerSecond(),
		RateBurst:        rec.GetRateBurst(),
		Group: broker.GroupPolicy{
			MaxSize:     rec.GetGroupMaxSize(),
			MaxDelay:    time.Duration(rec.GetGroupMaxDelay()),
			GracePeriod: time.Duration(rec.GetGroupGracePeriod()),
		},
		MaxWaiting: rec.GetMaxWaiting(),
		Push: broker.PushEndpoint{URL: rec.GetPushUrl(), Concurrency: rec.GetPushConcurrency(),
			Timeout: time.Duration(rec.GetPushTimeout())},
	}
}

func setQueueConfig(rec *storagev1.QueueRecord, cfg broker.QueueConfig) {
	rec.ConcurrencyLimit = cfg.ConcurrencyLimit
	rec.MaxActive = cfg.MaxActive
	rec.RatePerSecond = cfg.RatePerSecond
	rec.RateBurst = cfg.RateBurst
	rec.GroupMaxSize = cfg.Group.MaxSize
	rec.GroupMaxDelay = int64(cfg.Group.MaxDelay)
	rec.GroupGracePeriod = int64(cfg.Group.GracePeriod)
	rec.MaxWaiting = cfg.MaxWaiting
	rec.PushUrl, rec.PushConcurrency, rec.PushTimeout = cfg.Push.URL, cfg.Push.Concurrency, int64(cfg.Push.Timeout)
}
