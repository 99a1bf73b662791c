package sessions

import (
	"errors"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// Start authorization (at-most-once tasks, docs/protocol.md). A worker
// that declared start_authorization is sent at-most-once tasks with
// Dispatch.start_required, and asks with a Start frame before it runs one.
// The receive loop looks the attempt up and has the broker commit the
// start in a goroutine of its own (a commit takes a group commit's time;
// Results and Heartbeats keep flowing meanwhile); the decision goes out
// through the send loop, the stream's only writer.

// Why a start is refused, as StartDecision.reason says it.
const (
	refuseUnknown  = "unknown attempt: this session holds no live delivery with that attempt id"
	refuseLapsed   = "the lease lapsed before the start: the task will be redelivered"
	refuseLost     = "the lease is no longer current (it lapsed or was reassigned)"
	refuseCanceled = "the task was canceled before it started"
	refuseFailed   = "the start could not be committed: "
)

// startState is where a member is in start authorization.
type startState uint8

const (
	startNone    startState = iota
	startAsked              // a Start is being committed
	startGranted            // the start is committed and the worker told
)

// routeOf is what the session's leases may take (broker.Route).
func routeOf(h *conveyorv1.Hello) broker.Route {
	return broker.WorkerRoute(h.GetTypes(), h.GetBatchTypes(), h.GetStartAuthorization())
}

// start handles a Start frame.
func (s *session) start(f *conveyorv1.Start) error {
	id := f.GetAttemptId()
	if id == "" {
		return protocolError("start.attempt_id is required")
	}
	s.mu.Lock()
	m := s.flight.byAttempt[id]
	switch {
	case m == nil || m.answered:
		s.mu.Unlock()
		s.decide(id, refuseUnknown)
		return nil
	case m.lapsed:
		s.mu.Unlock()
		s.decide(id, refuseLapsed)
		return nil
	case m.start == startAsked:
		s.mu.Unlock()
		return nil // the first Start's decision is on its way
	case m.start == startGranted:
		s.mu.Unlock()
		s.decide(id, "")
		return nil
	}
	m.start = startAsked
	ref := m.ref()
	s.mu.Unlock()
	a, ok := s.hub.broker.(broker.StartAuthorizer)
	if !ok {
		return connect.NewError(connect.CodeUnimplemented, errors.New("this server's storage engine cannot authorize starts"))
	}
	go func() {
		err := a.AuthorizeStart(s.ctx, broker.StartParams{SessionID: s.id, Lease: ref, Now: s.hub.now()})
		reason := ""
		switch {
		case err == nil:
		case errors.Is(err, broker.ErrLeaseLost):
			reason = refuseLost
		case errors.Is(err, broker.ErrInvalidState):
			reason = refuseCanceled
		default:
			if s.ctx.Err() != nil {
				return // the session ended: nobody to tell
			}
			s.log.Error("committing a start failed", "task", ref.TaskID, "err", err)
			reason = refuseFailed + err.Error()
		}
		s.mu.Lock()
		if reason == "" {
			m.start = startGranted
		} else {
			m.start = startNone
		}
		s.mu.Unlock()
		s.decide(id, reason)
	}()
	return nil
}

// decide queues a StartDecision (authorized when reason is empty) for the
// send loop.
func (s *session) decide(attemptID, reason string) {
	d := &conveyorv1.StartDecision{AttemptId: attemptID, Authorized: reason == "", Reason: reason}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.decisions = append(s.decisions, d)
	s.mu.Unlock()
	s.hub.metrics.StartDecided(d.Authorized)
	s.wake()
}

// takeDecisionsLocked takes the StartDecisions to send.
func (s *session) takeDecisionsLocked() []*conveyorv1.StartDecision {
	d := s.decisions
	s.decisions = nil
	return d
}

func sendDecisions(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage], ds []*conveyorv1.StartDecision) error {
	for _, d := range ds {
		msg := &conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_StartDecision{StartDecision: d}}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	return nil
}
