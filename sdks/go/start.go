package conveyor

import (
	"context"
	"errors"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// Start authorization: an at-most-once task (TaskOptions.AtMostOnce) comes
// in a Dispatch with start_required, and its handler must not run before
// the server has committed the start. The Worker says so in every Hello
// (start_authorization), so the server may give it such tasks.
//
// An execution that needs it asks once it holds a concurrency slot and is
// about to run, and not before: an authorized start whose outcome never
// comes back is archived by the server ("outcome unknown"), never run
// again, so the worker asks only when nothing but the answer stands
// between it and the handler. acquire queues the Start in the same
// critical section that marks the execution started, so a drain either
// comes first (no Start is sent, and the task is left unstarted, as any
// other: the stream's close releases it) or finds the Start sent, and then
// counts the execution as running: once authorized it runs within the
// drain grace, as a handler already running would.
//
// While it waits for the StartDecision, the execution stays in flight: it
// holds its slot and is listed in heartbeats (task id and attempt id), so
// its lease lives. Then:
//
//   - authorized: the handler runs, and all goes on as for any task.
//   - refused: the handler does not run and no Result is sent (the server
//     has settled the attempt); the execution is forgotten, so heartbeats
//     stop listing it, and the reason is logged.
//   - a Cancel (or a lapsed lease, or the end of the drain grace) first:
//     the handler does not run, and the attempt is answered RELEASED.
//   - the stream ends first: the handler does not run, and nothing is
//     sent (the server releases the attempt with no penalty, or, had it
//     authorized the start, archives the task as an outcome unknown).
//
// An execution whose context ended is not run even if an authorized
// decision came too (they may cross): it is answered as above, and the
// server takes a RELEASED for a start it authorized as an outcome it does
// not know. Not running is the side to err on for such a task.

// startFrame is the Start that asks to run ex.
func startFrame(ex *execution) *conveyorv1.WorkerMessage {
	return &conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Start{
		Start: &conveyorv1.Start{AttemptId: ex.attempts[0]}}}
}

// askStartLocked registers ex as awaiting its StartDecision and queues its
// Start; the caller signals the writer once it has released s.mu. Call
// with s.mu.
func (s *session) askStartLocked(ex *execution) {
	ex.decision = make(chan *conveyorv1.StartDecision, 1)
	s.starting[ex.attempts[0]] = ex
	s.outbox = append(s.outbox, startFrame(ex))
}

// startDecision hands a StartDecision to the execution awaiting it. A
// decision for an attempt this session does not await (it ended, or was
// never asked for) is ignored.
func (s *session) startDecision(d *conveyorv1.StartDecision) {
	s.mu.Lock()
	ex := s.starting[d.GetAttemptId()]
	delete(s.starting, d.GetAttemptId())
	s.mu.Unlock()
	if ex == nil {
		s.log.Debug("ignored a start decision for an attempt this worker does not await",
			"attempt", d.GetAttemptId(), "authorized", d.GetAuthorized())
		return
	}
	ex.decision <- d // the only send: the entry is gone
}

// awaitStart waits for ex's StartDecision and reports whether its handler
// may run. When it may not, ex is settled here.
func (s *session) awaitStart(ex *execution) bool {
	select {
	case d := <-ex.decision:
		if ex.ctx.Err() != nil {
			break // the decision crossed a Cancel or the stream's end
		}
		if d.GetAuthorized() {
			return true
		}
		s.log.Warn("the server refused to start an at-most-once task; not running it",
			"task", ex.ids[0], "attempt", ex.attempts[0], "reason", d.GetReason())
		s.settle(ex, nil)
		return false
	case <-ex.ctx.Done():
	}
	s.settle(ex, ex.unauthorizedResults())
	return false
}

// unauthorizedResults answers an execution whose context ended before its
// start was authorized: RELEASED, as for any task that never ran, unless
// the stream is gone (nothing to answer on).
func (ex *execution) unauthorizedResults() []*conveyorv1.Result {
	switch cause := context.Cause(ex.ctx); {
	case errors.Is(cause, ErrCanceledByServer), errors.Is(cause, ErrLeaseExpired):
		return ex.results(conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED, "canceled before its start was authorized")
	case errors.Is(cause, ErrWorkerShutdown):
		return ex.results(conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED,
			"released by a worker shutting down before its start was authorized")
	default:
		return nil // the session is gone
	}
}
