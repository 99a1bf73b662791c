package server

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"
)

// MaxRoomWait bounds how long an enqueue refused by a full queue (one at
// its max_waiting) waits for room before it fails with
// resource_exhausted: a quarter of the call's remaining deadline, never
// more than this. A producer is held long enough to ride out a burst, not
// so long that its own loop stalls under sustained overload.
const MaxRoomWait = 5 * time.Second

// roomWait is how long a call whose context is ctx may wait for room,
// from now.
func roomWait(ctx context.Context, now time.Time) time.Duration {
	w := MaxRoomWait
	if dl, ok := ctx.Deadline(); ok {
		w = min(w, dl.Sub(now)/4)
	}
	return max(w, 0)
}

// roomWaits holds the enqueues waiting for room, per queue, in the order
// they began to wait; broker.Notifier.QueueRoom wakes them. A signal with
// room for n wakes the first n waiters of the queue, each told the room
// (its hint), so that a trickle of room wakes one waiter at a time and
// the longest waiting first, rather than every waiter at every change,
// and a waiter holding many tasks tries only as many as may fit. Nothing
// is kept for a queue nobody waits on, and no goroutine or timer runs for
// one.
//
// The engine signals at every change that leaves room, from a refusal
// until a signal finds nobody waiting. A waiter registers before it tries
// again and stays registered while it tries: a refusal of its try comes
// after its registration, so the room that follows is signalled to it
// (or, if it is not among the first, to those ahead, who leave or try).
type roomWaits struct {
	mu     sync.Mutex
	queues map[string][]*roomWaiter
	// closed ends every wait, and the ones to come: the server is
	// stopping, and its workers are gone.
	closed bool
}

// roomWaiter is one waiting call.
type roomWaiter struct {
	// wake holds a wake-up until taken (buffered 1).
	wake chan struct{}
	// hint is, per queue it waits on, the most room signalled since it
	// last took its hints (guarded by roomWaits.mu).
	hint map[string]int64
	// queues are the queues it is registered on.
	queues []string
}

func newRoomWaiter() *roomWaiter {
	return &roomWaiter{wake: make(chan struct{}, 1), hint: map[string]int64{}}
}

// signal wakes the first room waiters of queue, and says whether any
// waits. It is called under the engine's lock: it only sends on buffered
// channels.
func (r *roomWaits) signal(queue string, room int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	ws := r.queues[queue]
	r.wakeLocked(ws, queue, room)
	return len(ws) > 0
}

func (r *roomWaits) wakeLocked(ws []*roomWaiter, queue string, room int64) {
	for i, w := range ws {
		if int64(i) >= room {
			return
		}
		w.hint[queue] = max(w.hint[queue], room)
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
}

// close ends every wait at once, and makes later ones end at once: a
// stopping server has no worker left to make room, and its shutdown
// would otherwise wait for them.
func (r *roomWaits) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	for _, ws := range r.queues {
		for _, w := range ws {
			select {
			case w.wake <- struct{}{}:
			default:
			}
		}
	}
}

// register puts w at the end of the line of each of queues it is not in
// yet, and says whether there was any (never once closed).
func (r *roomWaits) register(w *roomWaiter, queues []string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	if r.queues == nil {
		r.queues = map[string][]*roomWaiter{}
	}
	added := false
	for _, q := range queues {
		if !slices.Contains(w.queues, q) {
			w.queues = append(w.queues, q)
			r.queues[q] = append(r.queues[q], w)
			added = true
		}
	}
	return added
}

// leave takes w out of the line of each queue it no longer waits on (all
// of them when keep is empty). Room w was told of and did not try is
// passed on to those behind it.
func (r *roomWaits) leave(w *roomWaiter, keep []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	kept := w.queues[:0]
	for _, q := range w.queues {
		if slices.Contains(keep, q) {
			kept = append(kept, q)
			continue
		}
		ws := r.queues[q]
		if i := slices.Index(ws, w); i >= 0 {
			ws = slices.Delete(ws, i, i+1)
		}
		if len(ws) == 0 {
			delete(r.queues, q)
		} else {
			r.queues[q] = ws
		}
		if h := w.hint[q]; h > 0 {
			delete(w.hint, q)
			r.wakeLocked(ws, q, h)
		}
	}
	w.queues = kept
}

// hints takes w's hints: per queue, how many of its tasks may fit (every
// one on its first try, before any signal).
func (r *roomWaits) hints(w *roomWaiter, first bool) map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int64, len(w.queues))
	for _, q := range w.queues {
		if first {
			out[q] = math.MaxInt64
		} else if h := w.hint[q]; h > 0 {
			out[q] = h
		}
		delete(w.hint, q)
	}
	return out
}

// isClosed reports whether close was called.
func (r *roomWaits) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// await is the one wait of a call that full queues refused: it tries
// again (try is given, per queue it waits on, how many tasks may fit,
// and returns the queues that still refuse the call) at once and then
// whenever room is signalled, until no queue refuses the call, the
// window passes or ctx ends.
func (r *roomWaits) await(ctx context.Context, window time.Duration, full []string, try func(room map[string]int64) []string) {
	if window <= 0 || len(full) == 0 {
		return
	}
	timer := time.NewTimer(window)
	defer timer.Stop()
	w := newRoomWaiter()
	defer r.leave(w, nil)
	r.register(w, full)
	for first := true; ; {
		if full = try(r.hints(w, first)); len(full) == 0 {
			return
		}
		r.leave(w, full)
		// A queue that refused the call for the first time (an
		// EnqueueTx refused by another queue) is tried again at once:
		// its room may have come before the registration.
		if first = r.register(w, full); first {
			continue
		}
		if r.isClosed() {
			return
		}
		select {
		case <-w.wake:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
