package conveyor

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/internal/testwait"
)

// sentTasks is a TaskService that stores every task it is sent and
// records which ids went out, alone or in a batch.
type sentTasks struct {
	conveyorv1connect.TaskServiceClient
	mu      sync.Mutex
	unary   []string
	batches [][]string
}

func (s *sentTasks) Enqueue(_ context.Context, req *connect.Request[conveyorv1.EnqueueRequest]) (*connect.Response[conveyorv1.EnqueueResponse], error) {
	s.mu.Lock()
	s.unary = append(s.unary, req.Msg.GetTaskId())
	s.mu.Unlock()
	return connect.NewResponse(&conveyorv1.EnqueueResponse{Task: &conveyorv1.TaskInfo{Id: req.Msg.GetTaskId()}}), nil
}

func (s *sentTasks) EnqueueBatch(_ context.Context, req *connect.Request[conveyorv1.EnqueueBatchRequest]) (*connect.Response[conveyorv1.EnqueueBatchResponse], error) {
	res := &conveyorv1.EnqueueBatchResponse{}
	var ids []string
	for _, it := range req.Msg.GetItems() {
		ids = append(ids, it.GetTaskId())
		res.Results = append(res.Results, &conveyorv1.EnqueueBatchResult{Task: &conveyorv1.TaskInfo{Id: it.GetTaskId()}})
	}
	s.mu.Lock()
	s.batches = append(s.batches, ids)
	s.mu.Unlock()
	return connect.NewResponse(res), nil
}

// enqueued is one caller's outcome.
type enqueued struct {
	id   string
	info *TaskInfo
	err  error
}

func (e enqueued) String() string {
	if e.err != nil {
		return "error " + e.err.Error()
	}
	return "task " + e.info.ID
}

// gather starts a caller per id on b (ids in canceled get a context that
// the returned cancel ends) and waits until they all wait in its
// gathering batch.
func gather(t *testing.T, b *enqueueBatcher, ids []string, canceled ...string) (<-chan enqueued, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan enqueued, len(ids))
	for _, id := range ids {
		callCtx := context.Background()
		if slices.Contains(canceled, id) {
			callCtx = ctx
		}
		go func() {
			info, err := b.enqueue(callCtx, &conveyorv1.EnqueueRequest{TaskId: id, Type: "t"})
			out <- enqueued{id, info, err}
		}()
	}
	testwait.Until(t, 10*time.Second, "every call gathered", func() bool { return b.gathered() >= len(ids) })
	return out, cancel
}

func (b *enqueueBatcher) gathered() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.gathering == nil {
		return 0
	}
	return b.gathering.live
}

// TestBatcherLeavesWithoutEndedCallers: a caller whose context ends just
// before its batch leaves, while the batcher is busy (here: an RPC
// returning, as returned does under b.mu) so that the caller cannot take
// itself out first, is not sent; it gets its context's error, once, and
// the others each get their own task.
func TestBatcherLeavesWithoutEndedCallers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name           string
		ids, canceled  []string
		unary, batched []string // what is sent
	}{
		{"the rest leave as a batch", []string{"X", "Y", "Z"}, []string{"X"}, nil, []string{"Y", "Z"}},
		{"the one left leaves alone", []string{"X", "Y"}, []string{"X"}, []string{"Y"}, nil},
		{"none left: nothing is sent", []string{"X", "Y"}, []string{"X", "Y"}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sent := &sentTasks{}
			b := &enqueueBatcher{tasks: sent, maxInFlight: 1, lingerFor: func(time.Duration) time.Duration { return 0 }}
			b.inFlight = 1 // an RPC is out, so calls gather
			outcomes, cancel := gather(t, b, tc.ids, tc.canceled...)
			b.mu.Lock()
			cancel()
			b.inFlight-- // the RPC returns, and the batch leaves in its place
			b.leaveLocked()
			b.mu.Unlock()

			for range tc.ids {
				o := <-outcomes
				switch {
				case slices.Contains(tc.canceled, o.id):
					if !errors.Is(o.err, context.Canceled) || connect.CodeOf(o.err) != connect.CodeCanceled {
						t.Errorf("%s, whose context ended, got %v; want a canceled error", o.id, o)
					}
				case o.err != nil || o.info.ID != o.id:
					t.Errorf("%s got %v; want its own task", o.id, o)
				}
			}
			sent.mu.Lock()
			defer sent.mu.Unlock()
			var batched []string // in arrival order, which the callers' goroutines decide
			if len(sent.batches) > 0 {
				batched = slices.Sorted(slices.Values(sent.batches[0]))
			}
			if !slices.Equal(sent.unary, tc.unary) || len(sent.batches) > 1 || !slices.Equal(batched, tc.batched) {
				t.Errorf("sent %v alone and %v in batches, want %v alone and [%v]", sent.unary, sent.batches, tc.unary, tc.batched)
			}
			if n := b.inFlightNow(); n != 0 {
				t.Errorf("%d RPCs in flight after every caller returned, want 0", n)
			}
		})
	}
}

func (b *enqueueBatcher) inFlightNow() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight
}
