package server

import (
	"context"
	"math"
	"testing"
	"time"
)

func TestRoomWait(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, c := range []struct {
		name     string
		deadline time.Duration // 0: none
		want     time.Duration
	}{
		{"no deadline", 0, MaxRoomWait},
		{"a quarter of a short deadline", 2 * time.Second, 500 * time.Millisecond},
		{"never more than the cap", time.Minute, MaxRoomWait},
		{"a deadline passed", -time.Second, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			if c.deadline != 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, now.Add(c.deadline))
				defer cancel()
			}
			if got := roomWait(ctx, now); got != c.want {
				t.Fatalf("roomWait = %s, want %s", got, c.want)
			}
		})
	}
}

// woken reports whether w has a wake-up waiting, taking it.
func woken(w *roomWaiter) bool {
	select {
	case <-w.wake:
		return true
	default:
		return false
	}
}

// TestRoomWaitsWakeInOrder: a signal with room for n wakes the first n
// waiters of the queue, oldest first, each told the room; the answer says
// whether anyone waits.
func TestRoomWaitsWakeInOrder(t *testing.T) {
	t.Parallel()
	var r roomWaits
	if r.signal("q", 5) {
		t.Fatal("signal answered that someone waits on a queue nobody waits on")
	}
	ws := []*roomWaiter{newRoomWaiter(), newRoomWaiter(), newRoomWaiter()}
	for _, w := range ws {
		r.register(w, []string{"q"})
	}
	r.register(ws[2], []string{"other"})
	if !r.signal("q", 2) {
		t.Fatal("signal answered that nobody waits")
	}
	for i, want := range []bool{true, true, false} {
		if got := woken(ws[i]); got != want {
			t.Fatalf("waiter %d woken: %v, want %v", i, got, want)
		}
	}
	if h := r.hints(ws[0], false); h["q"] != 2 {
		t.Fatalf("waiter 0's hints %v, want room 2 for q", h)
	}
	if h := r.hints(ws[0], false); len(h) != 0 {
		t.Fatalf("hints taken twice: %v", h)
	}
	// Waiter 1 leaves without trying the room it was told of: it goes to
	// the next in line.
	r.leave(ws[1], nil)
	if !woken(ws[2]) || r.hints(ws[2], false)["q"] != 2 {
		t.Fatal("room a leaving waiter did not try was not passed on")
	}
	// Leaving one queue keeps the others.
	r.leave(ws[2], []string{"other"})
	if !r.signal("other", math.MaxInt64) || !woken(ws[2]) {
		t.Fatal("a waiter that left one queue is no longer woken by the other")
	}
	r.leave(ws[0], nil)
	r.leave(ws[2], nil)
	if r.signal("q", 1) || r.signal("other", 1) || len(r.queues) != 0 {
		t.Fatalf("waiters remain after every one left: %v", r.queues)
	}
}

// TestRoomWaitsAwait: await tries at once, then on each signal with the
// room it was told, and returns once nothing refuses it, or when its
// window ends.
func TestRoomWaitsAwait(t *testing.T) {
	t.Parallel()
	var r roomWaits
	tries := make(chan map[string]int64)
	full := make(chan []string)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.await(context.Background(), time.Minute, []string{"q"}, func(room map[string]int64) []string {
			tries <- room
			return <-full
		})
	}()
	if room := <-tries; room["q"] != math.MaxInt64 {
		t.Fatalf("first try told room %v, want every task tried", room)
	}
	full <- []string{"q"}
	// A signal that comes as the waiter goes back to waiting is kept for
	// its next try.
	if !r.signal("q", 3) {
		t.Fatal("signal answered that nobody waits, with a waiter between two tries")
	}
	if room := <-tries; room["q"] != 3 {
		t.Fatalf("try after a signal told room %v, want 3", room)
	}
	full <- nil
	<-done
	if len(r.queues) != 0 {
		t.Fatalf("the waiter is still registered: %v", r.queues)
	}

	start := time.Now()
	r.await(context.Background(), 10*time.Millisecond, []string{"q"}, func(map[string]int64) []string { return []string{"q"} })
	if time.Since(start) < 10*time.Millisecond {
		t.Fatal("await returned before its window passed, with no room")
	}
}
