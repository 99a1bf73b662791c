package server

import (
	"context"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/lease"
)

// sendLoop is the stream's only writer. It wakes on ready work, on freed
// slots and on cancels, and leases as many tasks as the session has free
// slots, weighted across its queues.
func (s *session) sendLoop(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]) error {
	plan := &dispatchPlan{picker: newPicker(s.weights), ready: make([]int, len(s.queues)),
		groups: make([]int, len(s.queues)), skip: make([]bool, len(s.queues))}
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
	groups []int
	skip   []bool // queues whose Lease came back empty in this burst
	seq    []int
	picks  []broker.QueuePick
}

// free is how many more deliveries the session may be sent now, when each
// may cost up to unit bytes: its free slots, fewer when the bytes in
// flight near Config.MaxSessionBytes. At least one is allowed while
// nothing is in flight, so any single task or batch can be sent.
func (s *session) free(unit int64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.freeLocked(unit, s.flight.slots == 0)
}

// freeBatches is free for BatchDispatches. Their worst case (maxBatchBytes,
// about 22 MiB) is far above what most batches hold, and a batch is
// charged what it really holds once leased: so one more is allowed
// whenever the session holds less than Config.MaxSessionBytes, not only
// when it holds nothing. Otherwise a budget below the worst case would
// hold a session to one batch at a time, and one task in flight would
// keep every batch away. The bytes held pass the budget by one batch at
// most.
func (s *session) freeBatches() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.freeLocked(maxBatchBytes, s.flight.bytes < s.hub.cfg.MaxSessionBytes)
}

func (s *session) freeLocked(unit int64, atLeastOne bool) int {
	if s.ended {
		return 0
	}
	n := s.concurrency - s.flight.slots
	budget := int((s.hub.cfg.MaxSessionBytes - s.flight.bytes) / unit)
	if atLeastOne {
		budget = max(budget, 1)
	}
	return max(min(n, budget), 0)
}

func (s *session) takeCancels() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takeCancelsLocked()
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

// sendBurst sends pending Cancels and as many Dispatches as there are free
// slots, and flushes the stream once at the end.
//
// A lapse the reaper reports while the burst runs queues its Cancel after
// the burst took the pending ones, and the burst's Lease may return that
// very task again. So each Lease's deliveries are recorded together with
// the Cancels queued by then, which go out first: a worker always learns
// of a lapse before the task's redelivery (docs/protocol.md §6.8).
func (s *session) sendBurst(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage], plan *dispatchPlan) error {
	s.gate.hold()
	defer s.gate.release()
	if err := sendCancels(stream, s.takeCancels()); err != nil {
		return err
	}
	if len(s.batchTypes) > 0 {
		if free := s.freeBatches(); free > 0 {
			if err := s.dispatchGroups(stream, plan, free); err != nil {
				return err
			}
		}
	}
	free := s.free(maxEnvelopeBytes)
	if free <= 0 {
		return nil
	}
	// A Lease can come back empty although Ready counted work: another
	// session took the picked queues' tasks meanwhile, or the tasks had
	// expired and were archived on the pop. Nothing else would wake the
	// session for its other queues (TasksReady fires only when a ready
	// count leaves 0), so plan again without the queues that gave nothing.
	// Each empty round drops at least one queue, which bounds the loop.
	clear(plan.skip)
	for {
		s.hub.broker.Ready(s.queues, plan.ready)
		for i, skip := range plan.skip {
			if skip {
				plan.ready[i] = 0
			}
		}
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
		n, err := s.dispatch(stream, plan.picks)
		if err != nil || n > 0 {
			return err // having sent some, dispatch woke the loop to look again
		}
		for _, qi := range plan.seq {
			plan.skip[qi] = true
		}
	}
}

// dispatch leases the picked tasks and sends them. It returns how many it
// sent.
func (s *session) dispatch(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage], picks []broker.QueuePick) (int, error) {
	now := s.hub.now()
	leases, err := s.hub.broker.Lease(s.ctx, broker.LeaseParams{
		SessionID: s.id, Picks: picks, Now: now, TTL: s.hub.cfg.LeaseTTL, Limit: s.hub.limit(now),
	})
	if err != nil {
		if s.ctx.Err() != nil {
			return 0, context.Cause(s.ctx)
		}
		return 0, toConnectError(s.log, err)
	}
	if len(leases) == 0 {
		return 0, nil
	}
	msgs := make([]*conveyorv1.ServerMessage, len(leases))
	s.mu.Lock()
	if s.ended {
		// The session ended while the broker leased: hand them back.
		s.mu.Unlock()
		ms := make([]*member, len(leases))
		for i, l := range leases {
			ms[i] = &member{taskID: l.Task.ID, token: l.Token}
		}
		s.release(ms)
		return 0, context.Cause(s.ctx)
	}
	cancels := s.takeCancelsLocked()
	for i, l := range leases {
		m, env := s.deliverLocked(l, now)
		s.flight.add(&delivery{members: []*member{m}, bytes: envelopeBytes(env)})
		msgs[i] = &conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Dispatch{Dispatch: &conveyorv1.Dispatch{
			Task:      env,
			Deadline:  timestamppb.New(lease.DispatchDeadline(now, l.Expiry, l.Task)),
			AttemptId: env.AttemptId,
		}}}
	}
	s.mu.Unlock()
	if err := sendCancels(stream, cancels); err != nil {
		return 0, err
	}
	for _, msg := range msgs {
		if err := stream.Send(msg); err != nil {
			return 0, err
		}
	}
	// There may be more: look again (cheap, and it stops once a lease
	// comes back empty or the window is full).
	s.wake()
	return len(leases), nil
}

// deliverLocked makes the member and the envelope of one leased task
// about to be sent, with its attempt id, and counts the dispatch.
func (s *session) deliverLocked(l broker.Lease, now time.Time) (*member, *conveyorv1.TaskEnvelope) {
	env := envelope(l.Task)
	env.AttemptId = s.hub.attemptID(l.Token)
	s.hub.metrics.dispatchedTask(l.Task, now)
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
	// maxEnvelopeBytes is the most one envelope can cost.
	maxEnvelopeBytes = MaxPayloadBytes + MaxMetadataBytes + envelopeOverhead
	// maxBatchBytes is the most one BatchDispatch can cost: a group fires
	// once its members reach broker.MaxGroupBytes, so the member that
	// crossed it is the most it can go over, and it has at most
	// MaxGroupSize members.
	maxBatchBytes = broker.MaxGroupBytes + MaxPayloadBytes + MaxMetadataBytes + MaxGroupSize*envelopeOverhead
)

// dispatchGroups leases fired aggregation groups of the session's batch
// types, up to free of them (a batch is one slot), and sends each as one
// BatchDispatch.
func (s *session) dispatchGroups(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage], plan *dispatchPlan, free int) error {
	s.hub.broker.ReadyGroups(s.queues, s.batchTypes, plan.groups)
	sent := 0
	for i, n := range plan.groups {
		if n == 0 || sent == free {
			continue
		}
		now := s.hub.now()
		gls, err := s.hub.broker.LeaseGroups(s.ctx, broker.GroupLeaseParams{SessionID: s.id, Queue: s.queues[i],
			Types: s.batchTypes, N: min(n, free-sent), Now: now, TTL: s.hub.cfg.LeaseTTL, Limit: s.hub.limit(now)})
		if err != nil {
			if s.ctx.Err() != nil {
				return context.Cause(s.ctx)
			}
			return toConnectError(s.log, err)
		}
		// Every group is recorded before the first is sent, so that if the
		// session ends meanwhile (or a Send fails), end releases them all.
		cancels, msgs, ok := s.recordBatches(gls, now)
		if !ok {
			return context.Cause(s.ctx)
		}
		if err := sendCancels(stream, cancels); err != nil {
			return err
		}
		for _, msg := range msgs {
			if err := stream.Send(msg); err != nil {
				return err
			}
			sent++
		}
	}
	if sent > 0 {
		s.wake() // look again: more may be ready
	}
	return nil
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
