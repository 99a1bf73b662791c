package conveyor

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// An execution is one Dispatch (or one BatchDispatch) on a session, from
// its arrival to its Result. Each has a goroutine that waits for its turn
// (executions take concurrency slots in dispatch order), for a slot, and
// for any earlier attempt of the same task on the session to be answered;
// then runs the handler and queues exactly one Result (or BatchResult). An
// execution that cannot start (canceled, past its attempt's bound, or
// parked by a drain) is settled without running; see session for when a
// Result is still owed.

// execution is one dispatched task, or one batch, on a session.
type execution struct {
	s   *session
	d   *Delivery // the task, or a batch's first member
	ids []string  // the task ids it holds: one, or a batch's members
	// attempts are the attempt ids of ids' deliveries, echoed in their
	// Results and in Heartbeats; empty from a server that does not fence
	// attempts.
	attempts   []string
	batch      *DeliveryBatch
	batchFrame bool // it came as a BatchDispatch, and is answered with a BatchResult
	// ctx ends when the execution is canceled (a server Cancel, a lapsed
	// lease, a drain, the session's end); the handler's context adds the
	// task's own deadline to it (see begin).
	ctx    context.Context
	cancel context.CancelCauseFunc
	// startBy is the attempt's bound as the server reckons it: the
	// earliest, over its tasks, of the Deadline option (on this worker's
	// clock; see serverclock.go) and receipt plus the Timeout option
	// (Dispatch.deadline without its lease part), or zero.
	// Heartbeats hold a lease only a little past it (5s, on our server),
	// so an execution still waiting to start then gives its tasks back.
	startBy time.Time
	// received is when the server's Dispatch (or BatchDispatch) arrived:
	// each task's Timeout counts from it, as the server's does.
	received time.Time
	// prev is an earlier execution of the same task id on this session
	// (its lease lapsed and the task came back here): its Result must go
	// first, since the server drops the first Result after a lapse as the
	// late answer of the lapsed attempt.
	prev *execution
	// startRequired is set for an at-most-once task: its handler runs
	// only once the server authorizes the start (see start.go), whose
	// StartDecision comes on decision.
	startRequired bool
	decision      chan *conveyorv1.StartDecision
	done          chan struct{} // closed once settled
	// after is closed once the previously dispatched execution has taken
	// a slot or given up; turn is this execution's own, for the next one.
	after, turn chan struct{}

	// Guarded by s.mu.
	started, finished bool
	leaseExpiry       time.Time
	prog              progressState
	// canceled are the task ids a server Cancel named. In a batch, the
	// other members are stopped only because they share its handler.
	canceled map[string]bool
}

type progressState struct {
	percent  int32
	message  string
	dirty    bool
	lastSent time.Time
	timer    *time.Timer
}

// dispatch takes one Dispatch, received at now.
func (s *session) dispatch(base context.Context, d *conveyorv1.Dispatch, now time.Time) {
	env := d.GetTask()
	if env.GetId() == "" {
		s.log.Warn("ignored a dispatch without a task id")
		return
	}
	del := newDelivery(env)
	if del.AttemptID == "" {
		del.AttemptID = d.GetAttemptId() // the same as the envelope's, when both are set
	}
	ex := s.newExecution(base, []*Delivery{del}, now, timeOrZero(d.GetDeadline()))
	ex.startRequired = d.GetStartRequired()
	if s.w.batchHandlerFor(del.Type) != nil {
		// A batch member back on its own: a batch of one.
		ex.batch = &DeliveryBatch{Tasks: []*Delivery{del}}
	} else {
		del.ex = ex
	}
	s.admit(ex)
}

// dispatchBatch takes one BatchDispatch, received at now.
func (s *session) dispatchBatch(base context.Context, b *conveyorv1.BatchDispatch, now time.Time) {
	envs := b.GetTasks()
	if len(envs) == 0 {
		return
	}
	if s.w.batchHandlerFor(envs[0].GetType()) == nil {
		s.refuseBatch(b)
		return
	}
	batch := &DeliveryBatch{Group: b.GetGroup()}
	for _, env := range envs {
		batch.Tasks = append(batch.Tasks, newDelivery(env))
	}
	ex := s.newExecution(base, batch.Tasks, now, timeOrZero(b.GetDeadline()))
	ex.batch, ex.batchFrame = batch, true
	s.admit(ex)
}

// newExecution builds an execution of dels (one task, or a batch's
// members), received at now in a frame carrying deadline.
func (s *session) newExecution(base context.Context, dels []*Delivery, now, deadline time.Time) *execution {
	clock := s.clockFor(now, deadline, dels)
	ctx, cancel := context.WithCancelCause(base)
	ex := &execution{s: s, d: dels[0], ctx: ctx, cancel: cancel, received: now,
		done: make(chan struct{}), turn: make(chan struct{}), leaseExpiry: now.Add(s.leaseTTL),
		ids: make([]string, len(dels)), attempts: make([]string, len(dels))}
	for i, d := range dels {
		ex.ids[i], ex.attempts[i] = d.ID, d.AttemptID
		d.deadline = clock.local(d.Options.Deadline)
		ex.startBy = earlier(ex.startBy, d.attemptBound(now))
	}
	return ex
}

// deliveries are the tasks of ex: a batch's members, or the one task.
func (ex *execution) deliveries() []*Delivery {
	if ex.batch != nil {
		return ex.batch.Tasks
	}
	return []*Delivery{ex.d}
}

// begin sets each task's Deadline, its bound counted from receipt, and
// returns the handler's context, which ends at the earliest of them. The
// server counts a Timeout from the dispatch and takes the task back soon
// after (heartbeats cannot hold its lease past that), so a handler given
// its whole Timeout from a late start would be cut off by the server
// instead, its attempt counted failed and its Result dropped: a task that
// waited for a slot has that much less of its Timeout.
func (ex *execution) begin() (context.Context, context.CancelFunc) {
	var end time.Time
	for _, d := range ex.deliveries() {
		d.Deadline = d.attemptBound(ex.received)
		end = earlier(end, d.Deadline)
	}
	if end.IsZero() {
		return ex.ctx, func() {}
	}
	return context.WithDeadline(ex.ctx, end)
}

// admit registers ex with the session and starts its goroutine.
func (s *session) admit(ex *execution) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		ex.cancel(ErrSessionLost)
		return
	}
	if !ex.batchFrame {
		ex.prev = s.tasks[ex.ids[0]]
	}
	for _, id := range ex.ids {
		s.tasks[id] = ex
	}
	s.live[ex] = struct{}{}
	s.w.turnMu.Lock()
	ex.after, s.w.lastTurn = s.w.lastTurn, ex.turn
	s.w.turnMu.Unlock()
	s.mu.Unlock()
	s.w.running.Add(1)
	go s.execute(ex)
}

// execute runs one execution: wait for its turn and a slot, run the
// handler, queue the Result.
func (s *session) execute(ex *execution) {
	defer s.w.running.Done()
	defer ex.cancel(nil)
	if !s.acquire(ex) {
		return
	}
	defer func() { <-s.slots }()
	if ex.startRequired && !s.awaitStart(ex) {
		return
	}
	ctx, stop := ex.begin()
	defer stop()
	// Settle in a defer, so that even a handler that never returns
	// normally (runtime.Goexit, as t.FailNow does) yields one Result.
	var rs []*conveyorv1.Result
	defer func() {
		if rs == nil {
			rs = ex.resultsFor(ctx, errHandlerExited)
		}
		s.settle(ex, rs)
	}()
	rs = s.w.invoke(ctx, ex)
}

// errHandlerExited stands for a handler that ended by runtime.Goexit.
var errHandlerExited = errors.New("the handler exited without returning (runtime.Goexit)")

// resultsFor maps the return of ex's handler to its tasks' results: err
// as returned, or saying how a handler that did not return ended (a panic,
// runtime.Goexit). A batch member given its own outcome with
// DeliveryBatch.Fail keeps it however the handler ended, and one that
// failed only for another member is spared (see spareBystander).
func (ex *execution) resultsFor(ctx context.Context, err error) []*conveyorv1.Result {
	b := ex.batch
	if b == nil {
		return []*conveyorv1.Result{resultFor(ctx, ex.d, err)}
	}
	rs := make([]*conveyorv1.Result, len(b.Tasks))
	for i, m := range b.Tasks {
		rs[i] = ex.spareBystander(ctx, m, memberResult(ctx, b, m, err))
	}
	return rs
}

// memberResult maps the return of a batch handler to the Result of its
// member d: err, unless DeliveryBatch.Fail gave d an outcome of its own.
func memberResult(ctx context.Context, b *DeliveryBatch, d *Delivery, err error) *conveyorv1.Result {
	return resultFor(ctx, d, b.memberErr(d, err))
}

// acquire waits for ex's turn (executions take concurrency slots in the
// order they were dispatched, so the server's priority order holds even
// when dispatches queue up locally), then for a slot, then for an earlier
// attempt of the same task to be settled, and marks ex started. It returns
// false, having settled ex, when ex must not start: it was canceled or its
// startBy passed first, or the session is draining (ex then stays listed
// in heartbeats until the session ends or its startBy passes).
func (s *session) acquire(ex *execution) bool {
	wait, stopWait := ex.waitContext()
	defer stopWait()
	select {
	case <-ex.after:
	case <-wait.Done():
		s.endUnstarted(ex, wait)
		s.passTurn(ex)
		return false
	case <-s.drainCh:
		s.passTurn(ex)
		s.park(ex, wait)
		return false
	}
	select {
	case s.slots <- struct{}{}:
		close(ex.turn)
	case <-wait.Done():
		close(ex.turn)
		s.endUnstarted(ex, wait)
		return false
	case <-s.drainCh:
		close(ex.turn)
		s.park(ex, wait)
		return false
	}
	if ex.prev != nil {
		select {
		case <-ex.prev.done:
		case <-wait.Done():
		case <-s.drainCh:
		}
	}
	s.mu.Lock()
	if s.draining || s.ended || wait.Err() != nil {
		s.mu.Unlock()
		<-s.slots
		s.park(ex, wait)
		return false
	}
	ex.started = true
	s.started++
	if ex.startRequired {
		s.askStartLocked(ex) // now, so that a drain finds it asked or not asked (see start.go)
	}
	s.mu.Unlock()
	if ex.startRequired {
		s.signal()
	}
	return true
}

// passTurn lets the next execution try for a slot once the previous one
// has, keeping the dispatch order among those still waiting.
func (s *session) passTurn(ex *execution) {
	<-ex.after
	close(ex.turn)
}

// waitContext is ex's context until it starts: it also ends at startBy.
func (ex *execution) waitContext() (context.Context, context.CancelFunc) {
	if ex.startBy.IsZero() {
		return ex.ctx, func() {}
	}
	return context.WithDeadline(ex.ctx, ex.startBy)
}

// park holds an execution that will not start until wait ends (at the
// latest when the session does, or at its startBy), then settles it.
func (s *session) park(ex *execution, wait context.Context) {
	<-wait.Done()
	s.endUnstarted(ex, wait)
}

// endUnstarted settles an execution whose wait (see waitContext) ended
// before it started.
func (s *session) endUnstarted(ex *execution, wait context.Context) {
	cause := context.Cause(wait)
	switch {
	case errors.Is(cause, context.DeadlineExceeded):
		s.settle(ex, ex.unstartedResults())
	case errors.Is(cause, ErrCanceledByServer), errors.Is(cause, ErrLeaseExpired):
		// The server still expects this attempt's Result (it drops it),
		// before any Result for a redelivery of the task.
		s.settle(ex, ex.results(conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED, "canceled before it started"))
	default:
		s.settle(ex, nil) // the session is gone: nothing to report
	}
}

// unstartedResults answers the tasks of an execution whose startBy passed
// before it started. A task whose own bound had not passed when it arrived
// is given back (RELEASED): the server is about to take its lease back as
// a failed attempt, and it never ran, so this is no failure of the task
// (nor, in a drain, may it be one: protocol §5.10). A task whose deadline
// had already passed by then, by this worker's reckoning though not by the
// server's (which archives such a task instead of sending it), would come
// straight back if given back: it is failed (RETRY), to be backed off and
// archived once the server's clock passes the deadline.
func (ex *execution) unstartedResults() []*conveyorv1.Result {
	rs := make([]*conveyorv1.Result, len(ex.ids))
	for i, d := range ex.deliveries() {
		r := &conveyorv1.Result{TaskId: d.ID, AttemptId: ex.attempts[i], Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED,
			ErrorMsg: "released unstarted: its timeout or deadline passed while it waited to start"}
		if !d.attemptBound(ex.received).After(ex.received) {
			r.Outcome = conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY
			r.ErrorMsg = "not started: its deadline had passed by this worker's clock when it arrived (is the worker's clock ahead of the server's?)"
		}
		rs[i] = r
	}
	return rs
}

// results gives every task of ex the same outcome.
func (ex *execution) results(outcome conveyorv1.TaskOutcome, msg string) []*conveyorv1.Result {
	rs := make([]*conveyorv1.Result, len(ex.ids))
	for i, id := range ex.ids {
		rs[i] = &conveyorv1.Result{TaskId: id, AttemptId: ex.attempts[i], Outcome: outcome, ErrorMsg: msg}
	}
	return rs
}

// settle removes ex from the session and queues its results (none when
// rs is nil): a Result, or a BatchResult for a BatchDispatch, after any
// progress update still pending.
func (s *session) settle(ex *execution, rs []*conveyorv1.Result) {
	s.mu.Lock()
	if ex.finished {
		s.mu.Unlock()
		return
	}
	ex.finished = true
	delete(s.live, ex)
	if ex.startRequired && s.starting[ex.attempts[0]] == ex {
		delete(s.starting, ex.attempts[0]) // a decision that comes now is ignored
	}
	for _, id := range ex.ids {
		if s.tasks[id] == ex {
			delete(s.tasks, id)
		}
	}
	if ex.started {
		s.started--
		if s.ended {
			s.w.orphanReturned() // an orphan (see capacity.go)
		}
		if s.started == 0 && s.idle != nil {
			close(s.idle)
			s.idle = nil
		}
	}
	if ex.prog.timer != nil {
		ex.prog.timer.Stop()
		ex.prog.timer = nil
	}
	for _, r := range rs {
		boundResult(r)
	}
	if ex.batchFrame {
		boundBatch(rs)
	}
	queued := false
	if len(rs) > 0 && !s.ended && !s.closeRequested {
		if ex.prog.dirty {
			s.outbox = append(s.outbox, progressFrame(ex))
		}
		if ex.batchFrame {
			s.outbox = append(s.outbox, &conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_BatchResult{
				BatchResult: &conveyorv1.BatchResult{Results: rs}}})
		} else {
			s.outbox = append(s.outbox, &conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Result{Result: rs[0]}})
		}
		queued = true
	}
	s.mu.Unlock()
	close(ex.done)
	if queued {
		s.signal()
	}
}

// cancelTask handles a server Cancel: best effort, and a no-op for a task
// this session does not hold (it may have finished as the Cancel crossed
// its Result on the wire).
func (s *session) cancelTask(id string) {
	s.mu.Lock()
	ex := s.tasks[id]
	if ex != nil {
		if ex.canceled == nil {
			ex.canceled = map[string]bool{}
		}
		ex.canceled[id] = true
	}
	s.mu.Unlock()
	if ex == nil {
		s.log.Debug("ignored a cancel for a task this worker does not hold", "task", id)
		return
	}
	s.log.Info("the server canceled a task", "task", id)
	ex.cancel(ErrCanceledByServer)
}

// refuseBatch answers a BatchDispatch of a type this worker has no batch
// handler for (the server sends none unless asked), releasing every member.
func (s *session) refuseBatch(b *conveyorv1.BatchDispatch) {
	s.log.Warn("released a batch dispatch: this worker does not handle batches", "group", b.GetGroup(), "tasks", len(b.GetTasks()))
	results := make([]*conveyorv1.Result, 0, len(b.GetTasks()))
	for _, t := range b.GetTasks() {
		results = append(results, &conveyorv1.Result{TaskId: t.GetId(), AttemptId: t.GetAttemptId(),
			Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED, ErrorMsg: "this worker does not handle batches"})
	}
	s.mu.Lock()
	if !s.ended && !s.closeRequested {
		s.outbox = append(s.outbox, &conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_BatchResult{
			BatchResult: &conveyorv1.BatchResult{Results: results}}})
	}
	s.mu.Unlock()
	s.signal()
}

// progress records a handler's progress, sending it now or at the end of
// the task's progress interval, whichever is later (the latest value wins).
func (s *session) progress(ex *execution, percent int32, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ex.finished || s.ended || s.closeRequested {
		return
	}
	ex.prog.percent, ex.prog.message, ex.prog.dirty = percent, message, true
	if ex.prog.timer != nil {
		return // a flush is scheduled and will carry this value
	}
	wait := time.Until(ex.prog.lastSent.Add(s.w.cfg.progressInterval))
	if wait <= 0 {
		s.flushProgressLocked(ex)
		return
	}
	ex.prog.timer = time.AfterFunc(wait, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		ex.prog.timer = nil
		if !ex.finished && !s.ended && !s.closeRequested {
			s.flushProgressLocked(ex)
		}
	})
}

func (s *session) flushProgressLocked(ex *execution) {
	if !ex.prog.dirty {
		return
	}
	s.outbox = append(s.outbox, progressFrame(ex))
	s.signal()
}

// progressFrame takes ex's pending progress into a frame. Call with s.mu.
func progressFrame(ex *execution) *conveyorv1.WorkerMessage {
	ex.prog.dirty = false
	ex.prog.lastSent = time.Now()
	return &conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Progress{Progress: &conveyorv1.Progress{
		TaskId: ex.d.ID, Percent: ex.prog.percent, Message: ex.prog.message}}}
}

// invoke runs the handler for ex with ctx and maps its return (or panic)
// to its results.
func (w *Worker) invoke(ctx context.Context, ex *execution) []*conveyorv1.Result {
	return ex.resultsFor(ctx, w.runHandler(ctx, ex.d, ex.batch))
}

// runHandler runs the handler of d's type with ctx: the batch handler for
// b when b is not nil (d is then its first member), else d's handler
// wrapped in the middleware (the one that answers ErrNoHandler if the type
// has none). It returns the handler's error, or for a panic, an error
// saying so, having logged the panic with its stack. A session and a push
// endpoint (push_handler.go) both run handlers through it, so a task's
// outcome does not depend on how it came.
func (w *Worker) runHandler(ctx context.Context, d *Delivery, b *DeliveryBatch) (err error) {
	defer func() {
		if p := recover(); p != nil {
			w.log.Error("task handler panicked", "task", d.ID, "type", d.Type, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	if b != nil {
		return w.batchHandlerFor(d.Type).ProcessBatch(ctx, b)
	}
	return w.handlerFor(d.Type).ProcessTask(ctx, d)
}

// spareBystander turns the RETRY of a batch member that failed only
// because its batch was stopped for another member into RELEASED: stopped
// by a server Cancel that did not name it, or at another member's timeout
// or deadline while its own had not passed. It is no failure of its own
// (as a drain's abandonment is none, protocol §5.10), and RETRY would
// spend its retries (archiving it once they are spent) and hold it back by
// its backoff.
func (ex *execution) spareBystander(ctx context.Context, d *Delivery, r *conveyorv1.Result) *conveyorv1.Result {
	if r.Outcome != conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY || ctx.Err() == nil {
		return r
	}
	var why string
	switch cause := context.Cause(ctx); {
	case errors.Is(cause, ErrCanceledByServer) && !ex.namedByCancel(d.ID):
		why = "the server canceled another member of its batch"
	case errors.Is(cause, context.DeadlineExceeded) && !ownBoundPassed(ctx, d):
		why = "another member of its batch reached its timeout or deadline"
	default:
		return r
	}
	r.Outcome = conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED
	r.ErrorMsg = "released: " + why + ": " + r.ErrorMsg
	return r
}

// namedByCancel reports whether a server Cancel named task id.
func (ex *execution) namedByCancel(id string) bool {
	ex.s.mu.Lock()
	defer ex.s.mu.Unlock()
	return ex.canceled[id]
}

// ownBoundPassed reports whether d's own timeout or deadline is what ended
// ctx, whose deadline is the earliest of its batch's members' (see begin).
func ownBoundPassed(ctx context.Context, d *Delivery) bool {
	end, ok := ctx.Deadline()
	return ok && !d.Deadline.IsZero() && !d.Deadline.After(end)
}
