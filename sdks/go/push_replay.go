package conveyor

import (
	"container/heap"
	"errors"
	"sync"
	"time"
)

// A signed request stays valid for the tolerance around its timestamp, so
// one captured on the way could be sent again within it. The endpoint
// therefore remembers each webhook-id it accepted until its timestamp
// leaves the tolerance (after which the timestamp check refuses it), and
// refuses a repeat. The server gives every attempt its own id and never
// sends one twice, so a repeat is never the server's own.
//
// Memory is bounded: past its capacity the cache forgets the id closest to
// its expiry, and raises a floor to that expiry. A request that would
// expire no later than the floor may be one it forgot, so it is refused
// too: under a flood of accepted requests the window of acceptable
// timestamps narrows, but no replay gets through. The ids live in a map,
// their expiries in a min-heap, so each request costs O(log n).

var (
	// errReplayed is admit's answer for an id it holds.
	errReplayed = errors.New("webhook-id already accepted")
	// errForgotten is admit's answer for a request as old as ids it forgot.
	errForgotten = errors.New("webhook-timestamp older than the ids remembered")
)

// replayCache remembers the webhook-ids accepted, each until its expiry.
type replayCache struct {
	mu      sync.Mutex
	max     int
	expires map[string]time.Time
	order   expiryHeap
	floor   time.Time // requests expiring at or before it are refused
}

func newReplayCache(max int) *replayCache {
	return &replayCache{max: max, expires: map[string]time.Time{}}
}

// admit records id, to be remembered until expiry, as of now; it refuses
// an id it holds (errReplayed) and a request expiring no later than an id
// it forgot (errForgotten).
func (c *replayCache) admit(id string, expiry, now time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.order) > 0 && c.order[0].at.Before(now) {
		c.drop()
	}
	if _, ok := c.expires[id]; ok {
		return errReplayed
	}
	if !expiry.After(c.floor) {
		return errForgotten
	}
	for len(c.order) >= c.max {
		if at := c.drop(); at.After(c.floor) {
			c.floor = at
		}
		if !expiry.After(c.floor) {
			return errForgotten
		}
	}
	c.expires[id] = expiry
	heap.Push(&c.order, expiring{at: expiry, id: id})
	return nil
}

// drop forgets the id with the earliest expiry and returns that expiry.
func (c *replayCache) drop() time.Time {
	e := heap.Pop(&c.order).(expiring)
	delete(c.expires, e.id)
	return e.at
}

// size is how many ids c holds.
func (c *replayCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.expires)
}

type expiring struct {
	at time.Time
	id string
}

// expiryHeap is a min-heap of ids by expiry (container/heap).
type expiryHeap []expiring

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiring)) }
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = expiring{}
	*h = old[:len(old)-1]
	return e
}
