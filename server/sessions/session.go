package sessions

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"sync"
	"time"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// errShuttingDown ends sessions when the server stops; workers treat it as
// transient and reconnect.
var errShuttingDown = connect.NewError(connect.CodeUnavailable, errors.New("the server is shutting down"))

// errEndOfRequests marks a worker closing its side of the stream: a clean
// end of the session.
var errEndOfRequests = errors.New("the worker closed the stream")

// session is one worker's stream. Two goroutines serve it: the receive
// loop (this file: Result, BatchResult, Heartbeat, Credit, Progress) and
// the send loop (session_send.go: Dispatch, BatchDispatch and Cancel),
// which is the only writer of the stream.
//
// Flow control: the session holds at most window deliveries at once (its
// declared concurrency, capped at Config.MaxSessionConcurrency), and at
// most Config.MaxSessionBytes of their envelopes (see inflight for
// when a slot is taken and given back). The send loop leases exactly as
// many tasks as there are free slots, so the window is always full and a
// Credit frame (validated, then answered by refilling the window) never
// needs to add anything.
//
// The session ends when either side does. Whatever the reason, end
// releases every lease it still holds at once, with no retry increment,
// and cuts the send side, so a worker that stops reading cannot keep its
// tasks by leaving the server blocked in a write.
type session struct {
	id      string
	hub     *Hub
	log     *slog.Logger
	queues  []string
	weights []int
	// concurrency is what the Hello declared: a Credit's n is checked
	// against it (protocol §5.5). window is how many deliveries the session
	// is sent at most: concurrency, capped at Config.MaxSessionConcurrency
	// (the protocol lets a server send fewer than a worker can run).
	concurrency int
	window      int
	batchTypes  []string
	// route is what its leases may take (session_start.go); rel is its
	// release, as first seen (release.go; zero: unversioned).
	route       broker.Route
	rel         broker.Release
	hello       *conveyorv1.Hello
	connectedAt time.Time

	wakeCh chan struct{}
	gate   *flushGate // nil when the transport cannot batch flushes
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu            sync.Mutex
	flight        *inflight
	cancels       []string // Cancel frames to send
	decisions     []*conveyorv1.StartDecision
	lastHeartbeat time.Time
	ended         bool
	reclaimTimer  *time.Timer

	// completions applies the session's Results (session_complete.go).
	completions *completions
	// sendFence is the completions fence read with the send budget: the
	// deliveries that fill the slots it counted are sent after the
	// Results that freed them are recorded. Only the send loop uses it.
	sendFence uint64
	// parked is the lease the session parked for its free slots (park.go;
	// nil: none). Only the send loop uses it.
	parked *broker.ParkedLease
}

// Info is a snapshot of one live session, for ListWorkers.
type Info struct {
	// ID is the session's id, sent in its Welcome.
	ID string
	// Hello is the Hello the session opened with (not to be modified).
	Hello *conveyorv1.Hello
	// InFlight is its deliveries holding a slot.
	InFlight int
	// TaskIDs are the tasks it holds live, sorted.
	TaskIDs []string
	// ConnectedAt is when it opened; LastHeartbeat when it last sent a
	// Heartbeat (zero: never).
	ConnectedAt   time.Time
	LastHeartbeat time.Time
	// Draining is set when its release is drained: it is sent no new work.
	Draining bool
}

func newSession(ctx context.Context, h *Hub, id string, hello *conveyorv1.Hello, maxWindow int) *session {
	s := &session{
		id:          id,
		hub:         h,
		log:         h.log.With("session", id),
		concurrency: int(hello.GetConcurrency()),
		window:      min(int(hello.GetConcurrency()), maxWindow),
		hello:       hello,
		connectedAt: h.now(),
		wakeCh:      make(chan struct{}, 1),
		flight:      newInflight(),
	}
	for q := range hello.GetQueues() {
		s.queues = append(s.queues, q)
	}
	s.batchTypes = hello.GetBatchTypes()
	s.route = routeOf(hello)
	sort.Strings(s.queues)
	for _, q := range s.queues {
		s.weights = append(s.weights, int(hello.GetQueues()[q]))
	}
	s.gate = flushGateFrom(ctx)
	s.completions = newCompletions(s)
	s.ctx, s.cancel = context.WithCancelCause(ctx)
	return s
}

func (s *session) wake() {
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
}

// hasRoom reports whether the session has a free slot.
func (s *session) hasRoom() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.ended && s.flight.slots < s.window
}

// shutdown ends the session from the server side.
func (s *session) shutdown() { s.end(errShuttingDown) }

// end ends the session for cause: it releases every lease the session
// still holds (no retry increment) and stops the send loop (Session cuts
// a write it stays blocked in). It is idempotent.
func (s *session) end(cause error) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	live := s.flight.takeLive()
	if s.reclaimTimer != nil {
		s.reclaimTimer.Stop()
	}
	s.mu.Unlock()
	// Release first: canceling lets the handler end the stream, and a
	// worker that sees its session end must find none of its tasks still
	// leased to it (a supervisor checking them, the worker reconnecting).
	s.release(live)
	s.cancel(cause)
}

// release hands leases back with no retry increment.
func (s *session) release(ms []*member) {
	if len(ms) == 0 {
		return
	}
	refs := make([]broker.LeaseRef, len(ms))
	for i, m := range ms {
		refs[i] = m.ref()
	}
	if err := s.hub.broker.Release(context.WithoutCancel(s.ctx), broker.ReleaseParams{
		SessionID: s.id, Leases: refs, Now: s.hub.now(),
	}); err != nil {
		s.log.Warn("release the leases of an ended session", "err", err)
		return
	}
	s.log.Debug("released the leases of an ended session", "count", len(refs))
}

func (s *session) info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := s.flight.taskIDs()
	sort.Strings(ids)
	return Info{ID: s.id, Hello: s.hello, InFlight: s.flight.slots, TaskIDs: ids,
		ConnectedAt: s.connectedAt, LastHeartbeat: s.lastHeartbeat}
}

// registryInfo is the session as the registry records it (its Node is
// the engine's to fill in).
func (s *session) registryInfo() broker.SessionInfo {
	i := s.info()
	return broker.SessionInfo{ID: i.ID, Queues: i.Hello.GetQueues(), Concurrency: i.Hello.GetConcurrency(),
		InFlight: int32(i.InFlight), Labels: i.Hello.GetLabels(), SDKVersion: i.Hello.GetSdkVersion(),
		BatchTypes: i.Hello.GetBatchTypes(), ConnectedAt: i.ConnectedAt, LastHeartbeat: i.LastHeartbeat,
		Types: i.Hello.GetTypes(), ReleaseID: i.Hello.GetReleaseId(), StartAuthorization: i.Hello.GetStartAuthorization()}
}

// leaseLapsed records that the reaper took a task back. The worker is told
// to stop it; the slot stays taken until the worker answers for it or the
// reclaim window passes (see inflight).
func (s *session) leaseLapsed(l broker.LapsedLease) {
	ref := l.Lease
	s.mu.Lock()
	if m := s.flight.live[ref.TaskID]; m != nil && m.token == ref.Token {
		s.hub.metrics.LeaseLapsed(m.queue, m.typ, l.To)
	}
	if !s.ended && s.flight.lapse(ref.TaskID, ref.Token, s.hub.now(), s.hub.cfg.ReclaimWindow) {
		s.cancels = append(s.cancels, ref.TaskID)
		s.scheduleReclaimLocked(s.hub.now().Add(s.hub.cfg.ReclaimWindow))
	}
	s.mu.Unlock()
	s.wake()
}

// cancelRunning asks the worker to stop a task an operator canceled, if
// the session still holds that lease.
func (s *session) cancelRunning(ref broker.LeaseRef) {
	s.mu.Lock()
	if m := s.flight.live[ref.TaskID]; m != nil && m.token == ref.Token && !s.ended {
		s.cancels = append(s.cancels, ref.TaskID)
	}
	s.mu.Unlock()
	s.wake()
}

// scheduleReclaimLocked arms the reclaim timer for at, unless it is armed
// already (it re-arms itself for the next due time when it fires).
func (s *session) scheduleReclaimLocked(at time.Time) {
	if s.reclaimTimer != nil || at.IsZero() {
		return
	}
	s.reclaimTimer = time.AfterFunc(max(at.Sub(s.hub.now()), 0), s.reclaimDue)
}

// reclaimDue gives back the slots of lapsed deliveries whose window passed.
func (s *session) reclaimDue() {
	s.mu.Lock()
	s.reclaimTimer = nil
	if s.ended {
		s.mu.Unlock()
		return
	}
	before := s.flight.slots
	next := s.flight.reclaim(s.hub.now(), lapsedAnswerMemory)
	freed := s.flight.slots < before
	s.scheduleReclaimLocked(next)
	s.mu.Unlock()
	if freed {
		s.wake()
	}
}

// lapsedAnswerMemory is how long a session remembers that it is owed an
// answer for a lapsed delivery of a task it does not hold again (it never
// forgets while it holds the task again).
const lapsedAnswerMemory = time.Hour

// receiveLoop handles every frame after Hello until the stream ends. It
// returns the reason the session must end.
func (s *session) receiveLoop(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]) error {
	for {
		msg, err := stream.Receive()
		if errors.Is(err, io.EOF) {
			return errEndOfRequests
		}
		if err != nil {
			return err
		}
		if err := s.handle(msg); err != nil {
			return err
		}
	}
}

// handle applies one worker frame. Only protocol violations return an
// error (ending this stream alone); frames about tasks the session does
// not hold are dropped, and a bad value in a Result fails that task, not
// the stream.
func (s *session) handle(msg *conveyorv1.WorkerMessage) error {
	switch f := msg.GetFrame().(type) {
	case *conveyorv1.WorkerMessage_Result:
		s.results([]*conveyorv1.Result{f.Result}, false)
	case *conveyorv1.WorkerMessage_BatchResult:
		if err := (frameCounts{results: len(f.BatchResult.GetResults())}).check(); err != nil {
			return connect.NewError(connect.CodeInvalidArgument, err)
		}
		s.results(f.BatchResult.GetResults(), true)
	case *conveyorv1.WorkerMessage_Heartbeat:
		return s.heartbeat(f.Heartbeat)
	case *conveyorv1.WorkerMessage_Credit:
		n := f.Credit.GetN()
		if n <= 0 || int(n) > s.concurrency {
			return protocolError("credit.n must be 1..%d (the declared concurrency), got %d", s.concurrency, n)
		}
		s.wake()
	case *conveyorv1.WorkerMessage_Progress:
		s.progress(f.Progress)
	case *conveyorv1.WorkerMessage_Start:
		return s.start(f.Start)
	case *conveyorv1.WorkerMessage_Hello:
		return protocolError("hello may only be the first frame of a session")
	default:
		// An empty frame, or one this server does not know (a newer
		// worker): ignored, as unknown fields are.
	}
	return nil
}

// answered is a Result matched to the member it answers.
type answered struct {
	m *member
	r *conveyorv1.Result
}

// results applies Results (one frame's worth). A BatchResult is the whole
// answer of each batch it names (protocol §5.11): a live member it leaves
// out is RELEASED, and a lapsed one it leaves out is answered too (its
// lease is gone already, so there is nothing to apply), so the batch's slot
// is given back once the BatchResult is in, even when every member it
// names had lapsed.
func (s *session) results(rs []*conveyorv1.Result, batch bool) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	now, window := s.hub.now(), s.hub.cfg.ReclaimWindow
	var apply []answered
	var touched []*delivery
	for _, r := range rs {
		m := s.flight.answer(r.GetTaskId(), r.GetAttemptId(), now, window)
		if m == nil {
			s.hub.unknownResults.Add(1)
			s.log.Debug("dropped a result for a task this session does not hold", "task", r.GetTaskId())
			continue
		}
		if batch && m.d.batch {
			touched = append(touched, m.d)
		}
		if m.lapsed {
			s.hub.lateResults.Add(1)
			s.log.Info("dropped a result for a lapsed lease", "task", m.taskID)
			continue
		}
		apply = append(apply, answered{m, r})
	}
	for _, d := range touched {
		for _, m := range d.unanswered() {
			s.flight.answer(m.taskID, m.attemptID, now, window)
			if !m.lapsed {
				apply = append(apply, answered{m, &conveyorv1.Result{TaskId: m.taskID,
					Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED}})
			}
		}
	}
	s.scheduleReclaimLocked(s.flight.nextReclaim())
	// Queued under s.mu, before end can mark the session ended: the
	// completions goroutine, seeing it ended, finds every Result queued.
	s.completions.add(apply)
	s.mu.Unlock()
	// The answered slots are free now: the next tasks are leased while
	// these Results commit, and sent once they have (sendFence).
	s.wake()
}

// checkedResult bounds a Result's values: an oversized result fails the
// attempt (it is retried per its policy) instead of the stream, a long
// error message is truncated, and an unknown outcome counts as RELEASED.
func checkedResult(r *conveyorv1.Result) (conveyorv1.TaskOutcome, string, []byte) {
	outcome := r.GetOutcome()
	if _, known := conveyorv1.TaskOutcome_name[int32(outcome)]; !known {
		outcome = conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED
	}
	if n := len(r.GetResult()); n > wire.MaxResultBytes && outcome == conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		return conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY,
			resultTooLarge(n), nil
	}
	return outcome, wire.TruncateUTF8(r.GetErrorMsg(), wire.MaxErrorMessageBytes), r.GetResult()
}

func resultTooLarge(n int) string {
	return "the worker's result is " + strconv.Itoa(n) + " bytes; the limit is " + strconv.Itoa(wire.MaxResultBytes) + " (1 MiB)"
}

func (s *session) heartbeat(hb *conveyorv1.Heartbeat) error {
	if err := (frameCounts{heartbeatIDs: len(hb.GetActiveTaskIds()) + len(hb.GetActiveAttemptIds())}).check(); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	s.mu.Lock()
	s.lastHeartbeat = s.hub.now()
	ms := s.flight.held(hb.GetActiveTaskIds(), hb.GetActiveAttemptIds())
	refs := make([]broker.LeaseRef, len(ms))
	for i, m := range ms {
		refs[i] = m.ref()
	}
	s.mu.Unlock()
	if len(refs) == 0 {
		return nil
	}
	if _, err := s.hub.broker.Extend(s.ctx, broker.ExtendParams{
		SessionID: s.id, Leases: refs, Now: s.hub.now(), TTL: s.hub.cfg.LeaseTTL,
	}); err != nil && s.ctx.Err() == nil {
		s.log.Warn("extend leases", "err", err)
	}
	return nil
}

func (s *session) progress(p *conveyorv1.Progress) {
	s.mu.Lock()
	m := s.flight.live[p.GetTaskId()]
	s.mu.Unlock()
	if m == nil {
		return
	}
	err := s.hub.broker.Progress(s.ctx, broker.ProgressParams{
		SessionID: s.id, Lease: m.ref(), Percent: min(max(p.GetPercent(), 0), 100),
		Message: wire.TruncateUTF8(p.GetMessage(), wire.MaxProgressMessageBytes),
	})
	if err != nil && !errors.Is(err, broker.ErrLeaseLost) && s.ctx.Err() == nil {
		s.log.Warn("record progress", "task", p.GetTaskId(), "err", err)
	}
}
