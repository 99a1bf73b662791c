package bolt

import (
	"context"
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// Queues lists every known queue; see broker.Broker.
func (e *Engine) Queues(context.Context) ([]broker.QueueInfo, error) {
	e.mu.Lock()
	out := make([]broker.QueueInfo, 0, len(e.queues))
	for _, q := range e.queues {
		out = append(out, q.info())
	}
	e.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// SetQueuePaused pauses or resumes a queue, durably; see broker.Broker.
func (e *Engine) SetQueuePaused(ctx context.Context, name string, paused bool) (broker.QueueInfo, error) {
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
	q.paused = paused
	b := e.commit.appendSyncLocked(func(w *txw) error {
		rec := &storagev1.QueueRecord{}
		if v := w.qrecs.Get([]byte(name)); v != nil {
			if err := proto.Unmarshal(v, rec); err != nil {
				return fmt.Errorf("queue record %q: %w", name, err)
			}
		}
		rec.Paused = paused
		return w.qrecs.Put([]byte(name), marshal(rec))
	}, nil)
	if !paused && q.readyN > 0 {
		e.note.TasksReady(name)
	}
	info := q.info()
	e.mu.Unlock()
	if err := e.commit.wait(ctx, b); err != nil {
		return broker.QueueInfo{}, err
	}
	return info, nil
}
