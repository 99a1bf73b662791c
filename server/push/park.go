package push

import (
	"context"
	"net/http"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// With an engine that leases in an enqueue's transaction
// (broker.LeaseParker), an endpoint parks a lease as a worker's session
// does: the slots it has free and does not lease for itself are open to
// the enqueues of its queue, which lease in their own transaction and
// wake the consumer; its next fill collects what they granted and
// invokes it. A task then costs no lease transaction of the consumer's
// own, and no wait for one (docs/architecture.md).
//
// Only the consumer's loop offers, collects and re-parks, so a slot is
// never both open and leased by the loop. An answer is recorded before
// its invocation's slot is free again, so an offer needs no fence (mark
// 0). The parked lease's TTL is the endpoint's timeout when it was
// parked: a change of settings parks a new one. What the old one's
// claims granted before the change is invoked under the settings it was
// leased for; what they grant as it is unparked is handed back.

// parking is the consumer's parked lease and the settings it was parked
// under. The consumer's loop alone uses it.
type parking struct {
	lease    *broker.ParkedLease
	settings Settings
}

// parkedLease returns the consumer's parked lease for settings s,
// parking one (and unparking one parked under other settings) as
// needed; nil when the engine cannot park.
func (c *consumer) parkedLease(s Settings) *broker.ParkedLease {
	pk, ok := c.pool.broker.(broker.LeaseParker)
	if !ok {
		return nil
	}
	if c.parked.lease != nil && c.parked.settings == s {
		return c.parked.lease
	}
	c.unpark()
	c.parked = parking{settings: s, lease: broker.NewParkedLease(broker.LeaseParams{SessionID: c.sessionID,
		Picks: []broker.QueuePick{{Queue: c.queue}}, TTL: s.Timeout + leaseMargin, LimitGrace: c.pool.limitGrace,
		Push: true}, c.wake)}
	pk.ParkLease(c.parked.lease)
	return c.parked.lease
}

// offer keeps up to keep of the free slots for the loop's own lease and
// opens the rest to the enqueues' claims; it returns how many it kept.
// Without parking every free slot is the loop's. A consumer that has
// never had a free slot (this node does not lead) parks nothing.
func (c *consumer) offer(free, keep int, s Settings) int {
	if free <= 0 && c.parked.lease == nil {
		return 0
	}
	pl := c.parkedLease(s)
	if pl == nil {
		return min(keep, free)
	}
	kept, _ := pl.Offer(free, keep, 0)
	return kept
}

// startParked invokes what the enqueues' claims granted, up to free of
// them, and hands back the rest (the endpoint's concurrency was lowered,
// it answered 410, or this node no longer leads). It returns the slots
// still free.
func (c *consumer) startParked(free int, client *http.Client) int {
	if c.parked.lease == nil {
		return free
	}
	leases, _ := c.parked.lease.Collect()
	if len(leases) == 0 {
		return free
	}
	run := leases[:min(max(free, 0), len(leases))]
	now := c.pool.now()
	for _, l := range run {
		c.start(l, c.parked.settings, client, now)
	}
	c.release(leases[len(run):])
	return free - len(run)
}

// unpark drops the parked lease, waits for the claims in flight and hands
// back what they granted it.
func (c *consumer) unpark() {
	if c.parked.lease == nil {
		return
	}
	c.pool.broker.(broker.LeaseParker).UnparkLease(c.parked.lease)
	c.release(c.parked.lease.Close())
	c.parked = parking{}
}

// releaseTimeout bounds the hand-back of leases the endpoint will not
// invoke.
const releaseTimeout = 10 * time.Second

// release returns leases the endpoint will not invoke to their queue,
// with no attempt counted.
func (c *consumer) release(leases []broker.Lease) {
	if len(leases) == 0 {
		return
	}
	refs := make([]broker.LeaseRef, len(leases))
	for i, l := range leases {
		refs[i] = broker.LeaseRef{TaskID: l.Task.ID, Token: l.Token}
	}
	// Not the pool's life: a stopping pool still hands them back; bounded,
	// so that a store out of reach does not hold up the stop (the reaper
	// then takes them back).
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := c.pool.broker.Release(ctx, broker.ReleaseParams{SessionID: c.sessionID,
		Leases: refs, Now: c.pool.now()}); err != nil {
		c.pool.log.Warn("hand back leases the push endpoint will not invoke", "queue", c.queue, "err", err)
	}
}
