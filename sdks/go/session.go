package conveyor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// A session is one WorkerService.Session stream, from Hello to its end.
// Four goroutines serve it:
//
//   - the reader (the caller of run) receives Dispatch, Cancel, Ping,
//     BatchDispatch and StartDecision frames until the stream ends;
//   - the writer is the stream's only sender: Results, Starts, Progress,
//     Heartbeats and finally CloseRequest go through its outbox, in order;
//   - the heartbeat ticker asks the writer for a Heartbeat every
//     Welcome.heartbeat_interval, listing every task the session holds
//     (running, waiting for a concurrency slot or a StartDecision, or
//     parked by a drain), by
//     task id and by attempt id, in several frames if one would pass the
//     server's bound on ids;
//   - the controller runs the drain when the Worker stops.
//
// Each Dispatch becomes an execution with a goroutine of its own that waits
// for a concurrency slot, runs the handler and queues exactly one Result.
// An at-most-once task's execution first asks the server to authorize its
// start, and runs only if it does (see start.go).
// When the stream ends, every execution still held is canceled with cause
// ErrSessionLost and its result is dropped: the server has released its
// lease (and may already have given the task to another worker).
//
// # Slots
//
// A session runs its tasks in slots of its own, as many as its Hello
// declared, so that it can run every task the server may send it (§5.5).
// A handler that ignores the cancellation at the session's end lives on in
// its lost session's slot, an orphan; the next Hello declares the Worker's
// concurrency less its orphans, and waits, if they hold every slot, until
// one returns. A session keeps the concurrency it declared: a slot an
// orphan frees is the next session's (see capacity.go).
//
// # Attempts
//
// A fencing server names each delivery with an attempt id, and the worker
// echoes it in the delivery's Result and in every Heartbeat, so that the
// server applies them to that delivery only. The worker still answers an
// earlier attempt of a task before a redelivery of it on the same session
// (see execution.prev): a server that sends no attempt ids tells two
// Results for one task id apart only by their order.
//
// # Deadlines
//
// Dispatch.deadline is min(lease expiry, task deadline, dispatch time +
// task timeout). Its lease part moves: every Heartbeat extends the lease to
// heartbeat time + lease_ttl, so a long task that heartbeats must not be
// stopped when the first lease expiry passes. The handler's context
// therefore ends at the task's own bound only, computed from the envelope's
// options (the earlier of options.deadline, a time on the server's clock
// taken on this worker's as serverclock.go says, and receipt +
// options.timeout; see Delivery.Deadline), and the lease part is tracked
// separately: each execution's lease is reckoned as receive time + lease_ttl
// and pushed to heartbeat time + lease_ttl by every Heartbeat actually
// sent. Only if that reckoning passes (heartbeats could not be sent) is the
// handler canceled, with cause ErrLeaseExpired. A handler that overruns its
// task's bound gets context.DeadlineExceeded and is reported RETRY.
//
// The timeout counts from receipt, as the server's does from the dispatch:
// past it heartbeats no longer hold the lease, so a handler given more
// would be cut off by the server, its attempt counted failed. A task that
// has not started by then is reported RELEASED: it never ran, and holding
// it longer would only let the server take it back as a failed attempt.
//
// # Drain
//
// When the Worker stops, the controller stops new starts (a dispatch that
// arrives or is still waiting for a slot is not started but stays listed in
// heartbeats, so its lease survives until the close releases it with no
// penalty, protocol §5.10, or is RELEASED once its bound passes, as above),
// gives the running handlers the drain grace to
// finish and report their real outcome, cancels the rest with cause
// ErrWorkerShutdown (reported RELEASED), closes the request side and waits,
// bounded, for the server to end the stream.
type session struct {
	w                 *Worker
	id                string
	stream            *connect.BidiStreamForClient[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]
	abort             func() // cuts the stream at once
	log               *slog.Logger
	leaseTTL          time.Duration
	heartbeatInterval time.Duration

	wake chan struct{} // wakes the writer; capacity 1
	// slots is the session's concurrency semaphore, as large as its Hello
	// declared: a handler holds a slot from its start until its result is
	// queued. A handler that outlives the session keeps its slot here,
	// where no later session's task waits for it (see capacity.go).
	slots chan struct{}
	// clockOffset is this worker's wall clock less the server's, as the
	// latest dispatch that told it said, if clockKnown (see
	// serverclock.go). Only the reader touches them.
	clockOffset time.Duration
	clockKnown  bool
	drainCh     chan struct{} // closed when the drain begins
	done        chan struct{} // closed once the read side has ended

	mu             sync.Mutex
	tasks          map[string]*execution   // newest unreported execution per task id
	live           map[*execution]struct{} // every unreported execution
	starting       map[string]*execution   // executions awaiting a StartDecision, by attempt id
	outbox         []*conveyorv1.WorkerMessage
	heartbeatDue   bool
	closeRequested bool
	ended          bool
	draining       bool
	started        int           // started, unreported executions
	idle           chan struct{} // closed when started drops to 0 during a drain
}

var errHandshakeTimeout = fmt.Errorf("conveyor: no Welcome within %s of Hello", handshakeTimeout)

// runSession opens a stream to srv, says Hello, waits for Welcome and serves the
// session until the stream ends. established reports whether Welcome came.
func (w *Worker) runSession(base context.Context, srv sessionServer) (established bool, err error) {
	concurrency, ok := w.awaitCapacity()
	if !ok {
		return false, nil // stopping
	}
	streamCtx, cancelStream := context.WithCancelCause(context.Background())
	defer cancelStream(nil)
	stream := srv.client.Session(streamCtx)
	// Canceling the context alone does not always unblock a pending
	// Receive: once the response has started, net/http's HTTP/2 transport
	// notices the cancellation only when the request body yields, which a
	// quiet bidi stream never does. Closing both sides does unblock it.
	var abortOnce sync.Once
	abort := func(cause error) {
		abortOnce.Do(func() {
			cancelStream(cause)
			_ = stream.CloseResponse()
			_ = stream.CloseRequest()
		})
	}

	// Until Welcome, a stop or the handshake timeout aborts the stream.
	handshaking, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		t := time.NewTimer(handshakeTimeout)
		defer t.Stop()
		select {
		case <-handshaking:
		case <-w.stopCh:
			abort(ErrWorkerShutdown)
		case <-t.C:
			abort(errHandshakeTimeout)
		}
	}()
	welcome, err := w.handshake(stream, concurrency)
	close(handshaking)
	<-watched
	if cause := context.Cause(streamCtx); cause != nil {
		return false, cause
	}
	if err != nil {
		return false, err
	}

	s := &session{
		w:                 w,
		id:                welcome.GetSessionId(),
		stream:            stream,
		abort:             func() { abort(ErrSessionLost) },
		log:               w.log.With("session", welcome.GetSessionId(), "server", srv.url),
		leaseTTL:          welcome.GetLeaseTtl().AsDuration(),
		heartbeatInterval: welcome.GetHeartbeatInterval().AsDuration(),
		wake:              make(chan struct{}, 1),
		drainCh:           make(chan struct{}),
		done:              make(chan struct{}),
		tasks:             map[string]*execution{},
		live:              map[*execution]struct{}{},
		starting:          map[string]*execution{},
		slots:             make(chan struct{}, concurrency),
	}
	if s.leaseTTL <= 0 {
		s.leaseTTL = 60 * time.Second // the protocol's default
	}
	if s.heartbeatInterval <= 0 {
		s.heartbeatInterval = s.leaseTTL / 3
	}
	s.log.Info("worker session established", "server_version", welcome.GetServerVersion(),
		"lease_ttl", s.leaseTTL, "heartbeat_interval", s.heartbeatInterval)
	if hook := w.cfg.sessionHook; hook != nil {
		hook(s.id)
	}
	return true, s.run(base)
}

// handshake sends Hello, declaring concurrency, and returns the server's
// Welcome.
func (w *Worker) handshake(stream *connect.BidiStreamForClient[conveyorv1.WorkerMessage, conveyorv1.ServerMessage], concurrency int) (*conveyorv1.Welcome, error) {
	hello := &conveyorv1.Hello{
		Queues:           w.cfg.queues,
		Concurrency:      int32(concurrency),
		Labels:           w.cfg.labels,
		SdkVersion:       Version,
		MinServerVersion: w.cfg.minServerVersion,
		BatchTypes:       w.batchTypes(),
		Types:            w.handledTypes(),
		ReleaseId:        w.cfg.releaseID,
		// This worker asks before it runs an at-most-once task (see
		// start.go), so the server may give it such tasks.
		StartAuthorization: true,
	}
	err := stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Hello{Hello: hello}})
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	// On io.EOF the server ended the stream: Receive has its error.
	msg, err := stream.Receive()
	if errors.Is(err, io.EOF) {
		return nil, errors.New("conveyor: the server ended the stream before Welcome")
	}
	if err != nil {
		return nil, err
	}
	welcome := msg.GetWelcome()
	if welcome == nil {
		return nil, fmt.Errorf("conveyor: the server's first frame is %T, not Welcome", msg.GetFrame())
	}
	return welcome, nil
}

// run serves an established session until its stream ends, and returns why
// it ended (nil for a clean end).
func (s *session) run(base context.Context) error {
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); s.writeLoop() }()
	go func() { defer wg.Done(); s.heartbeatLoop() }()
	go func() { defer wg.Done(); s.control() }()
	err := s.readLoop(base)
	s.end()
	close(s.done)
	s.abort()
	wg.Wait()
	return err
}

// readLoop handles server frames until the stream ends.
func (s *session) readLoop(base context.Context) error {
	for {
		msg, err := s.stream.Receive()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		switch f := msg.GetFrame().(type) {
		case *conveyorv1.ServerMessage_Dispatch:
			s.dispatch(base, f.Dispatch, time.Now())
		case *conveyorv1.ServerMessage_Cancel:
			s.cancelTask(f.Cancel.GetTaskId())
		case *conveyorv1.ServerMessage_Ping:
			// A liveness probe: tolerated, never answered (§5.7).
		case *conveyorv1.ServerMessage_BatchDispatch:
			s.dispatchBatch(base, f.BatchDispatch, time.Now())
		case *conveyorv1.ServerMessage_StartDecision:
			s.startDecision(f.StartDecision)
		default:
			// A repeated Welcome, an empty frame or one this SDK does not
			// know (a newer server): ignored.
		}
	}
}

// end marks the stream gone and cancels every execution it still holds.
func (s *session) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	s.w.addOrphans(s.started) // settle counts each one's return
	for ex := range s.live {
		ex.cancel(ErrSessionLost)
		if ex.prog.timer != nil {
			ex.prog.timer.Stop()
			ex.prog.timer = nil
		}
	}
}

// signal wakes the writer.
func (s *session) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// writeLoop is the stream's only sender.
func (s *session) writeLoop() {
	for {
		select {
		case <-s.wake:
		case <-s.done:
			return
		}
		for {
			s.mu.Lock()
			frames := s.outbox
			s.outbox = nil
			beat := s.heartbeatDue
			s.heartbeatDue = false
			var hbs []*conveyorv1.Heartbeat
			var beating []*execution
			if beat {
				hbs, beating = s.heartbeatLocked()
			}
			closing := s.closeRequested
			s.mu.Unlock()
			if len(frames) == 0 && !beat && !closing {
				break
			}
			for _, f := range frames {
				if !s.send(f) {
					return
				}
			}
			if beat && !s.sendHeartbeats(hbs, beating) {
				return
			}
			if closing {
				if err := s.stream.CloseRequest(); err != nil {
					s.log.Debug("close the request side", "err", err)
				}
				return
			}
		}
	}
}

// heartbeatLocked builds the Heartbeats of everything the session holds
// (one, unless it holds more than maxHeartbeatIDs ids), and returns the
// executions whose leases they renew. Call with s.mu.
//
// active_task_ids lists each task id held (for servers that do not fence
// attempts); active_attempt_ids lists the attempt of every delivery still
// held, including an earlier attempt of a redelivered task that has yet to
// be answered (a fencing server extends exactly those, and ignores the
// ones it has taken back).
func (s *session) heartbeatLocked() ([]*conveyorv1.Heartbeat, []*execution) {
	hbs := newHeartbeatFrames(maxHeartbeatIDs)
	beating := make([]*execution, 0, len(s.tasks))
	for ex := range s.live {
		renewed := false
		for i, id := range ex.ids {
			taskID := ""
			if s.tasks[id] == ex { // the newest delivery of id
				taskID, renewed = id, true
			}
			hbs.add(taskID, ex.attempts[i])
		}
		if renewed {
			beating = append(beating, ex)
		}
	}
	return hbs.frames, beating
}

// heartbeatFrames packs the deliveries a session holds into Heartbeats of
// at most limit ids each. Several frames do what one would: the server
// extends the leases each one names, and takes nothing from what a frame
// leaves out (a lease lapses only when no frame renews it in time). A
// delivery's task id and attempt id go in the same frame, so that every
// frame reads the same to a server that fences attempts (it goes by
// attempt ids) and to one that does not (it goes by task ids).
type heartbeatFrames struct {
	limit  int
	frames []*conveyorv1.Heartbeat // never empty: an idle session still heartbeats
}

func newHeartbeatFrames(limit int) *heartbeatFrames {
	return &heartbeatFrames{limit: limit, frames: []*conveyorv1.Heartbeat{{}}}
}

// add lists one delivery by its task id and its attempt id; either may be
// empty (not listed).
func (h *heartbeatFrames) add(taskID, attemptID string) {
	n := 0
	if taskID != "" {
		n++
	}
	if attemptID != "" {
		n++
	}
	hb := h.frames[len(h.frames)-1]
	if len(hb.ActiveTaskIds)+len(hb.ActiveAttemptIds)+n > h.limit {
		hb = &conveyorv1.Heartbeat{}
		h.frames = append(h.frames, hb)
	}
	if taskID != "" {
		hb.ActiveTaskIds = append(hb.ActiveTaskIds, taskID)
	}
	if attemptID != "" {
		hb.ActiveAttemptIds = append(hb.ActiveAttemptIds, attemptID)
	}
}

// sendHeartbeats sends hbs and records the leases of beating as renewed
// from the moment the first was sent; false means the stream is broken.
func (s *session) sendHeartbeats(hbs []*conveyorv1.Heartbeat, beating []*execution) bool {
	at := time.Now()
	for _, hb := range hbs {
		if !s.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Heartbeat{Heartbeat: hb}}) {
			return false
		}
	}
	s.extendLeases(beating, at.Add(s.leaseTTL))
	return true
}

// send sends one frame; false means the stream is broken.
func (s *session) send(m *conveyorv1.WorkerMessage) bool {
	err := s.stream.Send(m)
	if err == nil {
		return true
	}
	// io.EOF: the server ended the stream, and the reader will get the
	// reason. Anything else: cut the stream so the reader stops too.
	if !errors.Is(err, io.EOF) {
		s.log.Warn("send to the server", "err", err)
		s.abort()
	}
	return false
}

// extendLeases records that a heartbeat sent at (expiry - lease_ttl)
// renewed the listed executions' leases.
func (s *session) extendLeases(exs []*execution, expiry time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ex := range exs {
		if expiry.After(ex.leaseExpiry) {
			ex.leaseExpiry = expiry
		}
	}
}

// heartbeatLoop asks the writer for a Heartbeat every interval, and cancels
// executions whose lease, as reckoned here, has lapsed.
func (s *session) heartbeatLoop() {
	t := time.NewTicker(s.heartbeatInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-s.done:
			return
		}
		now := time.Now()
		s.mu.Lock()
		for ex := range s.live {
			if now.After(ex.leaseExpiry) && ex.ctx.Err() == nil {
				s.log.Warn("task lease lapsed: heartbeats could not be sent", "tasks", ex.ids)
				ex.cancel(ErrLeaseExpired)
			}
		}
		s.heartbeatDue = true
		s.mu.Unlock()
		s.signal()
	}
}

// waitResult says how a control wait ended.
type waitResult int

const (
	waitReached  waitResult = iota // the awaited channel closed
	waitTimedOut                   // the bound passed
	waitAbandon                    // Shutdown's context ended
	waitKilled                     // Close
	waitEnded                      // the stream ended
)

// await waits for ch, at most d, watching for Close and for the stream's
// end, and for Shutdown's context too when abandonable.
func (s *session) await(ch <-chan struct{}, d time.Duration, abandonable bool) waitResult {
	t := time.NewTimer(d)
	defer t.Stop()
	var abandon <-chan struct{} // nil: never ready
	if abandonable {
		abandon = s.w.abandonCh
	}
	select {
	case <-ch:
		return waitReached
	case <-t.C:
		return waitTimedOut
	case <-abandon:
		return waitAbandon
	case <-s.w.killCh:
		return waitKilled
	case <-s.done:
		return waitEnded
	}
}

// control waits for the Worker to stop, then drains the session (or cuts
// it, on Close).
func (s *session) control() {
	select {
	case <-s.w.stopCh:
	case <-s.done:
		return
	}
	select {
	case <-s.w.killCh:
		s.abort()
		return
	default:
	}
	if !s.drain() {
		return
	}
	s.requestClose()
	// Not abandonable: the results just queued go out before the close,
	// and cutting the stream now could lose them.
	switch s.await(s.done, closeWait, false) {
	case waitReached, waitEnded:
	default:
		s.abort()
	}
}

// drain stops new starts, lets the running handlers finish within the
// drain grace (or until Shutdown's context ends), then cancels the rest
// and waits, bounded, for them to return. It returns false if the stream
// ended or was cut meanwhile.
func (s *session) drain() bool {
	idle, running := s.beginDrain()
	s.log.Info("worker draining", "running", running, "grace", s.w.cfg.drainGrace)
	switch s.await(idle, s.w.cfg.drainGrace, true) {
	case waitKilled:
		s.abort()
		return false
	case waitEnded:
		return false
	case waitReached:
		return true
	}
	n := s.cancelStarted(ErrWorkerShutdown)
	s.log.Info("drain grace over: releasing the tasks still running", "count", n)
	// Not abandonable: Shutdown's context may be what ended the grace,
	// and the handlers just canceled are still to be reported RELEASED.
	switch s.await(idle, drainUnwind, false) {
	case waitKilled:
		s.abort()
		return false
	case waitEnded:
		return false
	}
	return true
}

// beginDrain stops new starts and returns a channel closed once no started
// execution is left, and how many are running now.
func (s *session) beginDrain() (<-chan struct{}, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = true
	close(s.drainCh)
	ch := make(chan struct{})
	if s.started == 0 {
		close(ch)
	} else {
		s.idle = ch
	}
	return ch, s.started
}

// cancelStarted cancels every running handler with cause.
func (s *session) cancelStarted(cause error) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for ex := range s.live {
		if ex.started {
			ex.cancel(cause)
			n++
		}
	}
	return n
}

// requestClose has the writer flush its outbox and close the request side.
func (s *session) requestClose() {
	s.mu.Lock()
	s.closeRequested = true
	s.mu.Unlock()
	s.signal()
}
