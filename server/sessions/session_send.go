package sessions

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/lease"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// sendLoop is the stream's only writer. It wakes on ready work, on freed
// slots and on cancels, and leases as many tasks as the session has free
// slots, weighted across its queues.
func (s *session) sendLoop(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]) error {
	defer s.unpark()
	plan := newDispatchPlan(s.weights)
	s.wake() // the queues may hold work already
	var outage storageOutage
	for {
		select {
		case <-s.ctx.Done():
			return context.Cause(s.ctx)
		case <-s.wakeCh:
		}
		err := s.sendBurst(stream, plan)
		if errors.Is(err, broker.ErrUnavailable) {
			// The store is down: the session stays up, and dispatch
			// goes on once it answers again.
			if err := outage.wait(s.ctx); err != nil {
				return err
			}
			s.wake()
			continue
		}
		if err != nil {
			return err
		}
		outage.reset()
	}
}

// storageOutage paces a session's retries while the store cannot be
// reached: waits that double from storageRetryMin to storageRetryMax.
type storageOutage struct{ next time.Duration }

const (
	storageRetryMin = 100 * time.Millisecond
	storageRetryMax = 2 * time.Second
)

// wait waits the next retry's delay, or until ctx ends.
func (o *storageOutage) wait(ctx context.Context) error {
	o.next = min(max(o.next*2, storageRetryMin), storageRetryMax)
	t := time.NewTimer(o.next)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

func (o *storageOutage) reset() { o.next = 0 }

// budget is what the session may be sent now: its free slots, of which
// single tasks may take fewer when the bytes in flight near
// Config.MaxSessionBytes (each may cost up to MaxEnvelopeBytes; at least
// one is allowed while nothing is in flight, so any task can be sent), and
// batches too, by their own rule (below).
func (s *session) budget() sendBudget {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return sendBudget{}
	}
	b := sendBudget{slots: s.window - s.flight.slots, singles: s.freeLocked(MaxEnvelopeBytes, s.flight.slots == 0)}
	if len(s.batchTypes) > 0 {
		// A batch's worst case (maxBatchBytes, about 22 MiB) is far above
		// what most batches hold, and a batch is charged what it really
		// holds once leased: so one more is allowed whenever the session
		// holds less than Config.MaxSessionBytes, not only when it holds
		// nothing. Otherwise a budget below the worst case would hold a
		// session to one batch at a time, and one task in flight would keep
		// every batch away. The bytes held pass the budget by one batch at
		// most.
		b.batches = s.freeLocked(maxBatchBytes, s.flight.bytes < s.hub.cfg.MaxSessionBytes)
	}
	return b
}

// free is how many single tasks the session may be sent now, after the
// batches of a round were charged what they hold.
func (s *session) free() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.freeLocked(MaxEnvelopeBytes, s.flight.slots == 0)
}

func (s *session) freeLocked(unit int64, atLeastOne bool) int {
	if s.ended {
		return 0
	}
	n := s.window - s.flight.slots
	budget := int((s.hub.cfg.MaxSessionBytes - s.flight.bytes) / unit)
	if atLeastOne {
		budget = max(budget, 1)
	}
	return max(min(n, budget), 0)
}

func (s *session) takeCancelsLocked() []string {
	c := s.cancels
	s.cancels = nil
	return c
}

func sendCancels(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage], ids []string) error {
	for _, id := range ids {
		msg := &conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Cancel{Cancel: &conveyorv1.Cancel{TaskId: id}}}
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	return nil
}

// sendBurst sends pending Cancels and as many Dispatches and
// BatchDispatches as there are free slots, and flushes the stream once at
// the end.
//
// A lapse the reaper reports while the burst runs queues its Cancel after
// the burst took the pending ones, and the burst's Lease may return that
// very task again. So each Lease's deliveries are recorded together with
// the Cancels queued by then, which go out first: a worker always learns
// of a lapse before the task's redelivery (docs/protocol.md §6.8).
func (s *session) sendBurst(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage], plan *dispatchPlan) error {
	s.gate.hold()
	defer s.gate.release()
	s.mu.Lock()
	cancels, decisions := s.takeCancelsLocked(), s.takeDecisionsLocked()
	s.mu.Unlock()
	if err := sendCancels(stream, cancels); err != nil {
		return err
	}
	if err := sendDecisions(stream, decisions); err != nil {
		return err
	}
	if n, err := s.sendParked(stream); err != nil || n > 0 {
		return err // having sent some, it woke the loop to look again
	}
	if s.hub.draining(s) {
		s.withdraw()
		return nil // its release was drained: it finishes what it holds
	}
	// A Lease can come back empty although Ready counted work: another
	// session took the picked queues' tasks meanwhile, or the tasks had
	// expired and were archived on the pop; a fired group may wait for
	// room under its queue's cap or for tokens. Nothing else would wake the
	// session for its other queues (TasksReady fires only when a ready
	// count leaves 0), so plan again without what gave nothing (a queue's
	// groups and its tasks apart). Each empty round drops at least one,
	// which bounds the loop.
	clear(plan.skip)
	clear(plan.skipGroups)
	for {
		s.sendFence = s.completions.fence() // before the budget: the slots it counts were freed by then
		b := s.budget()
		// The slots offered to the enqueues are taken back while the
		// round is planned (park.go); those their claims hold are not
		// the round's.
		free := b.singles
		var claimed int
		b.singles, claimed = s.offer(free, free)
		b.slots -= claimed
		if b.singles <= 0 && b.batches <= 0 {
			return nil
		}
		s.hub.broker.Ready(s.queues, plan.ready)
		clear(plan.groups)
		if b.batches > 0 {
			s.hub.broker.ReadyGroups(s.queues, s.batchTypes, plan.groups)
		}
		if !plan.fill(s.queues, b) {
			s.offer(free, 0)
			return nil
		}
		s.offer(free, plan.singlesPicked()) // the slots the round leaves free wait for an enqueue while it leases
		n, err := s.sendRound(stream, plan, claimed)
		if err != nil || n > 0 {
			return err // having sent some, the round woke the loop to look again
		}
		if n, err := s.sendParked(stream); err != nil || n > 0 {
			return err
		}
		plan.skipPicked()
	}
}

// sendRound leases and sends what plan picked: the groups first, then the
// tasks, as many as the bytes the groups hold leave room for (less the
// slots claimed of the parked lease). It returns how many deliveries it
// sent.
func (s *session) sendRound(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage], plan *dispatchPlan, claimed int) (int, error) {
	sent, err := s.dispatchGroups(stream, plan.batchN)
	if err != nil {
		return sent, err
	}
	picks := plan.picks
	if sent > 0 {
		picks = plan.singlePicks(s.free() - claimed)
	}
	n, err := s.dispatch(stream, picks)
	return sent + n, err
}

// dispatch leases the picked tasks and sends them. It returns how many it
// sent.
func (s *session) dispatch(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage], picks []broker.QueuePick) (int, error) {
	if len(picks) == 0 {
		return 0, nil
	}
	now := s.hub.now()
	var leases []broker.Lease
	for _, c := range s.hub.leaseCalls(s, picks) {
		ls, err := s.hub.broker.Lease(s.ctx, broker.LeaseParams{
			SessionID: s.id, Picks: c.picks, Now: now, TTL: s.hub.cfg.LeaseTTL, LimitGrace: s.hub.cfg.LimitGrace,
			Route: c.route,
		})
		if err != nil {
			if len(leases) > 0 {
				s.release(membersOf(leases)) // a failed call leaves nothing leased
			}
			if s.ctx.Err() != nil {
				return 0, context.Cause(s.ctx)
			}
			return 0, wire.ConnectError(s.log, err)
		}
		leases = append(leases, ls...)
	}
	return s.sendLeases(stream, leases, now)
}

// sendLeases records leases just granted as deliveries and sends them,
// with the Cancels queued by then first. It returns how many it sent.
func (s *session) sendLeases(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage], leases []broker.Lease, now time.Time) (int, error) {
	if len(leases) == 0 {
		return 0, nil
	}
	// A session ending meanwhile is seen below and hands the leases back.
	_ = s.completions.await(s.ctx, s.sendFence)
	out, ok := s.recordLeases(leases, now)
	if !ok {
		return 0, context.Cause(s.ctx)
	}
	return out.send(stream, s)
}

// recorded is leases recorded as deliveries, to send: the Cancels queued
// by then first.
type recorded struct {
	cancels []string
	msgs    []*conveyorv1.ServerMessage
}

// recordLeases records leases just granted as deliveries. It returns
// false, having handed them back, when the session ended meanwhile.
func (s *session) recordLeases(leases []broker.Lease, now time.Time) (recorded, bool) {
	msgs := make([]*conveyorv1.ServerMessage, len(leases))
	s.mu.Lock()
	if s.ended {
		// The session ended while the broker leased: hand them back.
		s.mu.Unlock()
		s.release(membersOf(leases))
		return recorded{}, false
	}
	cancels := s.takeCancelsLocked()
	for i, l := range leases {
		m, env := s.deliverLocked(l, now)
		s.flight.add(&delivery{members: []*member{m}, bytes: envelopeBytes(env)})
		msgs[i] = &conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Dispatch{Dispatch: &conveyorv1.Dispatch{
			Task:          env,
			Deadline:      timestamppb.New(lease.DispatchDeadline(now, l.Expiry, l.Task)),
			AttemptId:     env.AttemptId,
			StartRequired: l.Task.AtMostOnce,
		}}}
	}
	s.mu.Unlock()
	return recorded{cancels: cancels, msgs: msgs}, true
}

// send sends what was recorded, and returns how many deliveries.
func (r recorded) send(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage], s *session) (int, error) {
	if err := sendCancels(stream, r.cancels); err != nil {
		return 0, err
	}
	for _, msg := range r.msgs {
		if err := stream.Send(msg); err != nil {
			return 0, err
		}
	}
	// There may be more: look again (cheap, and it stops once a lease
	// comes back empty or the window is full).
	s.wake()
	s.hub.filledUp(s)
	return len(r.msgs), nil
}

// membersOf names leases just granted, to hand them back.
func membersOf(leases []broker.Lease) []*member {
	ms := make([]*member, len(leases))
	for i, l := range leases {
		ms[i] = &member{taskID: l.Task.ID, token: l.Token}
	}
	return ms
}

// deliverLocked makes the member and the envelope of one leased task
// about to be sent, with its attempt id, and counts the dispatch.
func (s *session) deliverLocked(l broker.Lease, now time.Time) (*member, *conveyorv1.TaskEnvelope) {
	env := wire.Envelope(l.Task)
	env.AttemptId = s.hub.AttemptID(l.Token)
	s.hub.metrics.TaskDispatched(l.Task, now)
	return &member{taskID: l.Task.ID, attemptID: env.AttemptId, token: l.Token, queue: l.Task.Queue, typ: l.Task.Type,
		sentAt: now, retried: l.Task.Retried, maxRetry: l.Task.MaxRetry, policy: l.Task.RetryPolicy}, env
}

// envelopeBytes is what an envelope costs the session's byte budget: its
// payload and metadata, plus a fixed allowance for the rest.
func envelopeBytes(env *conveyorv1.TaskEnvelope) int64 {
	n := int64(len(env.GetPayload())) + envelopeOverhead
	for k, v := range env.GetMetadata() {
		n += int64(len(k) + len(v))
	}
	return n
}

const (
	// envelopeOverhead approximates an envelope's ids, names and options.
	envelopeOverhead = 512
	// MaxEnvelopeBytes is the most one envelope can cost a session's byte
	// budget: Config.MaxSessionBytes must be at least this, so that any
	// task can be sent.
	MaxEnvelopeBytes = wire.MaxPayloadBytes + wire.MaxMetadataBytes + envelopeOverhead
	// maxBatchBytes is the most one BatchDispatch can cost: a group fires
	// once its members reach broker.MaxGroupBytes, so the member that
	// crossed it is the most it can go over, and it has at most
	// wire.MaxGroupSize members.
	maxBatchBytes = broker.MaxGroupBytes + wire.MaxPayloadBytes + wire.MaxMetadataBytes + wire.MaxGroupSize*envelopeOverhead
)

// dispatchGroups leases fired aggregation groups of the session's batch
// types, counts[i] of queue i (a batch is one slot), and sends each as one
// BatchDispatch. It returns how many it sent.
func (s *session) dispatchGroups(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage], counts []int) (int, error) {
	sent := 0
	for i, n := range counts {
		if n == 0 {
			continue
		}
		now := s.hub.now()
		gls, err := s.hub.broker.LeaseGroups(s.ctx, broker.GroupLeaseParams{SessionID: s.id, Queue: s.queues[i],
			Types: s.batchTypes, N: n, Now: now, TTL: s.hub.cfg.LeaseTTL, LimitGrace: s.hub.cfg.LimitGrace})
		if err != nil {
			if s.ctx.Err() != nil {
				return sent, context.Cause(s.ctx)
			}
			return sent, wire.ConnectError(s.log, err)
		}
		if len(gls) > 0 {
			_ = s.completions.await(s.ctx, s.sendFence) // an ending session is seen below
		}
		// Every group is recorded before the first is sent, so that if the
		// session ends meanwhile (or a Send fails), end releases them all.
		cancels, msgs, ok := s.recordBatches(gls, now)
		if !ok {
			return sent, context.Cause(s.ctx)
		}
		if err := sendCancels(stream, cancels); err != nil {
			return sent, err
		}
		for _, msg := range msgs {
			if err := stream.Send(msg); err != nil {
				return sent, err
			}
			sent++
		}
	}
	if sent > 0 {
		s.wake() // look again: more may be ready
	}
	return sent, nil
}

// recordBatches records leased groups, each as one delivery, and builds
// their BatchDispatches: each member with its own attempt id, the deadline
// the tightest across them. It also takes the Cancels queued by then, to
// be sent first. It returns false, having released every group's leases,
// when the session ended meanwhile.
func (s *session) recordBatches(gls []broker.GroupLease, now time.Time) ([]string, []*conveyorv1.ServerMessage, bool) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		var ms []*member
		for _, gl := range gls {
			for _, l := range gl.Leases {
				ms = append(ms, &member{taskID: l.Task.ID, token: l.Token})
			}
		}
		s.release(ms)
		return nil, nil, false
	}
	cancels := s.takeCancelsLocked()
	msgs := make([]*conveyorv1.ServerMessage, len(gls))
	for i, gl := range gls {
		bd := &conveyorv1.BatchDispatch{Group: gl.Group}
		d := &delivery{batch: true}
		var deadline time.Time
		for _, l := range gl.Leases {
			m, env := s.deliverLocked(l, now)
			bd.Tasks = append(bd.Tasks, env)
			d.members = append(d.members, m)
			d.bytes += envelopeBytes(env)
			if dl := lease.DispatchDeadline(now, l.Expiry, l.Task); deadline.IsZero() || dl.Before(deadline) {
				deadline = dl
			}
		}
		bd.Deadline = timestamppb.New(deadline)
		s.flight.add(d)
		msgs[i] = &conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_BatchDispatch{BatchDispatch: bd}}
	}
	s.mu.Unlock()
	return cancels, msgs, true
}
