package server

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/lease"
)

// errShuttingDown ends sessions when the server stops; workers treat it as
// transient and reconnect.
var errShuttingDown = connect.NewError(connect.CodeUnavailable, errors.New("the server is shutting down"))

// session is one worker's stream. Two goroutines serve it: the receive
// loop (Result, Heartbeat, Credit, Progress) and the send loop (Dispatch
// and Cancel), which is the only writer of the stream.
//
// Flow control: the session may hold at most concurrency outstanding
// tasks. A Result frees one slot; so does a lapsed lease, since the
// reaper took the task back. The send loop leases exactly as many tasks as
// there are free slots, so the window is always full and a Credit frame
// (validated, then answered by refilling the window) never needs to add
// anything.
type session struct {
	id          string
	hub         *hub
	log         *slog.Logger
	queues      []string
	weights     []int
	concurrency int
	hello       *conveyorv1.Hello
	connectedAt time.Time

	wakeCh chan struct{}
	gate   *flushGate // nil when the transport cannot batch flushes
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu            sync.Mutex
	outstanding   map[string]uint64    // task id → lease token
	lapsed        map[string]time.Time // task ids whose lease the reaper took back
	cancels       []string             // Cancel frames to send
	lastHeartbeat time.Time
}

type sessionInfo struct {
	id            string
	hello         *conveyorv1.Hello
	inFlight      int
	connectedAt   time.Time
	lastHeartbeat time.Time
}

func newSession(ctx context.Context, h *hub, id string, hello *conveyorv1.Hello) *session {
	s := &session{
		id:          id,
		hub:         h,
		log:         h.log.With("session", id),
		concurrency: int(hello.GetConcurrency()),
		hello:       hello,
		connectedAt: h.now(),
		wakeCh:      make(chan struct{}, 1),
		outstanding: map[string]uint64{},
		lapsed:      map[string]time.Time{},
	}
	for q := range hello.GetQueues() {
		s.queues = append(s.queues, q)
	}
	sort.Strings(s.queues)
	for _, q := range s.queues {
		s.weights = append(s.weights, int(hello.GetQueues()[q]))
	}
	s.gate = flushGateFrom(ctx)
	s.ctx, s.cancel = context.WithCancelCause(ctx)
	return s
}

func (s *session) wake() {
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
}

// shutdown ends the session from the server side.
func (s *session) shutdown() { s.cancel(errShuttingDown) }

func (s *session) info() sessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sessionInfo{id: s.id, hello: s.hello, inFlight: len(s.outstanding),
		connectedAt: s.connectedAt, lastHeartbeat: s.lastHeartbeat}
}

// free is how many more tasks the session may be sent now.
func (s *session) free() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.concurrency - len(s.outstanding)
}

// takeOutstanding removes and returns every lease the session holds.
func (s *session) takeOutstanding() []broker.LeaseRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	refs := make([]broker.LeaseRef, 0, len(s.outstanding))
	for id, tok := range s.outstanding {
		refs = append(refs, broker.LeaseRef{TaskID: id, Token: tok})
	}
	clear(s.outstanding)
	return refs
}

// settle removes a task from the outstanding set when the worker reports
// it. It returns the lease to name, or ok=false for a task the session
// does not hold (a late Result after a lapse, or an unknown id).
func (s *session) settle(id string) (broker.LeaseRef, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, late := s.lapsed[id]; late {
		// The worker is answering for the attempt the reaper took back,
		// even if the task was since redelivered here: drop it.
		delete(s.lapsed, id)
		s.hub.lateResults.Add(1)
		s.log.Info("dropped a result for a lapsed lease", "task", id)
		return broker.LeaseRef{}, false
	}
	tok, ok := s.outstanding[id]
	if !ok {
		s.hub.unknownResults.Add(1)
		s.log.Debug("dropped a result for a task this session does not hold", "task", id)
		return broker.LeaseRef{}, false
	}
	delete(s.outstanding, id)
	return broker.LeaseRef{TaskID: id, Token: tok}, true
}

// held returns the leases of the listed tasks that the session holds.
func (s *session) held(ids []string) []broker.LeaseRef {
	s.mu.Lock()
	defer s.mu.Unlock()
	refs := make([]broker.LeaseRef, 0, len(ids))
	for _, id := range ids {
		if tok, ok := s.outstanding[id]; ok {
			refs = append(refs, broker.LeaseRef{TaskID: id, Token: tok})
		}
	}
	return refs
}

// leaseLapsed records that the reaper took a task back: its slot is free,
// and the worker is told to stop it.
func (s *session) leaseLapsed(ref broker.LeaseRef) {
	s.mu.Lock()
	if tok, ok := s.outstanding[ref.TaskID]; ok && tok == ref.Token {
		delete(s.outstanding, ref.TaskID)
		now := s.hub.now()
		s.lapsed[ref.TaskID] = now
		s.pruneLapsedLocked(now)
		s.cancels = append(s.cancels, ref.TaskID)
	}
	s.mu.Unlock()
	s.wake()
}

// pruneLapsedLocked forgets lapses old enough that no late Result for them
// can still be expected.
func (s *session) pruneLapsedLocked(now time.Time) {
	for id, at := range s.lapsed {
		if now.Sub(at) > 2*s.hub.cfg.LeaseTTL {
			delete(s.lapsed, id)
		}
	}
}

func (s *session) takeCancels() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cancels
	s.cancels = nil
	return c
}

// sendLoop is the stream's only writer. It wakes on ready work, on freed
// slots and on cancels, and leases as many tasks as the session has free
// slots, weighted across its queues.
func (s *session) sendLoop(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]) error {
	plan := &dispatchPlan{picker: newPicker(s.weights), ready: make([]int, len(s.queues))}
	s.wake() // the queues may hold work already
	for {
		select {
		case <-s.ctx.Done():
			return context.Cause(s.ctx)
		case <-s.wakeCh:
		}
		if err := s.sendBurst(stream, plan); err != nil {
			return err
		}
	}
}

// dispatchPlan is the send loop's scratch space, reused across bursts.
type dispatchPlan struct {
	picker *picker
	ready  []int
	seq    []int
	picks  []broker.QueuePick
}

// sendBurst sends pending Cancels and as many Dispatches as there are free
// slots, and flushes the stream once at the end.
func (s *session) sendBurst(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage], plan *dispatchPlan) error {
	s.gate.hold()
	defer s.gate.release()
	for _, id := range s.takeCancels() {
		msg := &conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Cancel{Cancel: &conveyorv1.Cancel{TaskId: id}}}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	free := s.free()
	if free <= 0 {
		return nil
	}
	s.hub.broker.Ready(s.queues, plan.ready)
	plan.seq = plan.picker.plan(plan.ready, free, plan.seq)
	if len(plan.seq) == 0 {
		return nil
	}
	plan.picks = plan.picks[:0]
	for _, qi := range plan.seq {
		if n := len(plan.picks); n > 0 && plan.picks[n-1].Queue == s.queues[qi] {
			plan.picks[n-1].N++
		} else {
			plan.picks = append(plan.picks, broker.QueuePick{Queue: s.queues[qi], N: 1})
		}
	}
	return s.dispatch(stream, plan.picks)
}

// dispatch leases the picked tasks and sends them.
func (s *session) dispatch(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage], picks []broker.QueuePick) error {
	now := s.hub.now()
	leases, err := s.hub.broker.Lease(s.ctx, broker.LeaseParams{
		SessionID: s.id, Picks: picks, Now: now, TTL: s.hub.cfg.LeaseTTL,
	})
	if err != nil {
		if s.ctx.Err() != nil {
			return context.Cause(s.ctx)
		}
		return toConnectError(s.log, err)
	}
	s.mu.Lock()
	for _, l := range leases {
		s.outstanding[l.Task.ID] = l.Token
	}
	s.mu.Unlock()
	for _, l := range leases {
		msg := &conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Dispatch{Dispatch: &conveyorv1.Dispatch{
			Task:     envelope(l.Task),
			Deadline: timestamppb.New(lease.Deadline(now, l.Expiry, l.Task)),
		}}}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	if len(leases) > 0 {
		// There may be more: look again (cheap, and it stops once a
		// lease comes back empty or the window is full).
		s.wake()
	}
	return nil
}
