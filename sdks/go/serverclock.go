package conveyor

import "time"

// A task's Deadline option is a time on the server's clock, and this
// worker's clock may be ahead of it or behind. Were the worker to compare
// the option with its own clock, one ahead by more than the time left
// would find every such task past its deadline on arrival and give it
// back unstarted, with no penalty, for the server to send straight back,
// again and again until the server's clock reached the deadline. So the
// worker reckons the time left from the dispatch instead: it estimates the
// server's clock at the dispatch, and the deadline falls that long after
// the receipt, on the worker's own (monotonic) clock.
//
// The estimate comes from the frame. Dispatch.deadline (a BatchDispatch's
// too) is the earliest of the lease expiry, dispatch time + lease_ttl, and
// the attempt's bounds: the Deadline option and dispatch time + Timeout
// (protocol §5.4). Unless a Deadline option is what set it, it is
// therefore the dispatch time plus the shorter of lease_ttl and the
// Timeout, which gives the server's clock exactly. The session keeps the
// difference between the clocks it learns that way, and uses it for a
// frame whose deadline a Deadline option set: that frame tells only that
// the dispatch came at most lease_ttl (or Timeout) before it. With no
// difference learned yet, the worker's clock stands in for the server's.
// A task that then finds its deadline passed on arrival is failed (RETRY),
// not given back: the server backs it off, and archives it once its own
// clock passes the deadline, instead of sending it straight back.

// dispatchClock relates the server's clock to this worker's for one frame.
type dispatchClock struct {
	received time.Time // the frame's receipt, on this worker's clock
	serverAt time.Time // the server's clock at the receipt, as estimated
}

// local is server time t on this worker's clock: as long after the
// receipt as t is after the dispatch. It keeps the receipt's monotonic
// reading, so a step of the wall clock does not move it.
func (c dispatchClock) local(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return c.received.Add(t.Sub(c.serverAt))
}

// clockFor estimates the server's clock at the receipt of a frame that
// carries deadline (zero if it had none) for dels, received at received.
// Only the reader calls it.
func (s *session) clockFor(received, deadline time.Time, dels []*Delivery) dispatchClock {
	// The wall clock alone (no monotonic reading), as compared with the server's.
	wall := received.Add(s.w.wallSkew).Round(0)
	if deadline.IsZero() {
		return dispatchClock{received: received, serverAt: s.serverNow(wall)}
	}
	window := s.leaseTTL // how long after the dispatch its deadline falls, unless an option set it
	setByOption := false
	for _, d := range dels {
		if to := d.Options.Timeout; to > 0 && to < window {
			window = to
		}
		if dl := d.Options.Deadline; !dl.IsZero() && !deadline.Before(dl) {
			setByOption = true
		}
	}
	dispatched := deadline.Add(-window) // exact, unless an option set the deadline
	if !setByOption {
		s.clockOffset, s.clockKnown = wall.Sub(dispatched), true
		return dispatchClock{received: received, serverAt: dispatched}
	}
	// The dispatch came at most window before deadline.
	at := s.serverNow(wall)
	if at.Before(dispatched) {
		at = dispatched
	}
	return dispatchClock{received: received, serverAt: at}
}

// serverNow is the server's clock when this worker's wall clock reads wall,
// by the difference learned from earlier frames, if any.
func (s *session) serverNow(wall time.Time) time.Time {
	if !s.clockKnown {
		return wall
	}
	return wall.Add(-s.clockOffset)
}
