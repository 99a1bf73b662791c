package sessions

import (
	"context"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// With an engine that can lease in an enqueue's transaction
// (broker.LeaseParker), a session parks one lease for its life and
// offers it the free slots it does not lease for itself: all of them
// when it found nothing ready, the rest while a round of its own leases.
// Each enqueue of tasks it takes claims some of them and, once
// committed, wakes the session, whose next burst collects what the
// claims granted and sends it first (sendParked). Only the send loop
// offers and collects, and each burst takes the open slots back before it
// plans (offer), so no slot is leased twice.
//
// A session of batch types offers no slot (parking), nor does a session
// of a drained release, nor one that a session of a newer release serves
// a queue of: which types it may take then depends on the newer ones'
// room at the moment of the lease (routeFor), which an offer cannot
// follow, and new work is the newer release's first. So where every
// worker runs one release (the steady state between deploys), each
// parks; during a deploy, the newest release's sessions do, and the
// older ones lease as before. A versioned session's arrival, end or
// drain wakes the sessions of its queues, whose next burst offers or
// takes back their slots as this now says.

// offer keeps up to keep of the session's free slots for itself and
// opens the rest to the enqueues' claims, when the engine takes them and
// parking is on. It returns how many slots it kept, and how many the
// claims not collected hold.
func (s *session) offer(free, keep int) (kept, claimed int) {
	pl := s.parkedLease()
	if pl == nil {
		return min(keep, free), 0
	}
	if !s.parking() {
		keep = free
	}
	return pl.Offer(free, keep, s.sendFence)
}

// withdraw takes back every slot the session offered (its release was
// drained: it leases nothing new).
func (s *session) withdraw() {
	if s.parked != nil {
		s.parked.Offer(0, 0, s.sendFence)
	}
}

// parking reports whether the session may offer slots now. A session
// of batch types offers none: a batch's bytes are known only once it is
// leased, and claims in flight could take the bytes it counted on.
func (s *session) parking() bool {
	if len(s.batchTypes) > 0 || s.ctx.Err() != nil {
		return false
	}
	return s.hub.versioned.Load() == 0 || !s.hub.outranked(s)
}

// parkedLease returns the session's parked lease, parking it on first
// use; nil when the engine cannot park.
func (s *session) parkedLease() *broker.ParkedLease {
	if s.parked != nil {
		return s.parked
	}
	pk, ok := s.hub.broker.(broker.LeaseParker)
	if !ok {
		return nil
	}
	picks := make([]broker.QueuePick, len(s.queues))
	for i, q := range s.queues {
		picks[i] = broker.QueuePick{Queue: q}
	}
	s.parked = broker.NewParkedLease(broker.LeaseParams{SessionID: s.id, Picks: picks, TTL: s.hub.cfg.LeaseTTL,
		LimitGrace: s.hub.cfg.LimitGrace, Route: s.route}, s.wake)
	pk.ParkLease(s.parked)
	return s.parked
}

// sendParked collects what the enqueues' claims granted and sends it. It
// returns how many it sent. Each lease goes out once the Results that
// freed its slot are recorded, as a lease of the session's own: the
// fence read with the offer it was claimed from.
func (s *session) sendParked(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]) (int, error) {
	if s.parked == nil {
		return 0, nil
	}
	leases, fence := s.parked.Collect()
	if len(leases) == 0 {
		return 0, nil
	}
	out, ok := s.recordLeases(leases, s.hub.now())
	if !ok {
		return 0, context.Cause(s.ctx)
	}
	_ = s.completions.await(s.ctx, fence) // an ending session is seen by the sends
	return out.send(stream, s)
}

// unpark closes the parked lease as the send loop ends, and hands back
// what claims granted it that was not sent.
func (s *session) unpark() {
	if s.parked == nil {
		return
	}
	s.hub.broker.(broker.LeaseParker).UnparkLease(s.parked)
	if leases := s.parked.Close(); len(leases) > 0 {
		s.release(membersOf(leases))
	}
}
