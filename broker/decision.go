package broker

import "time"

// Decision is what the caller (a worker session, the lease reaper)
// decided should become of a leased task. The engine applies it atomically
// under the lease's fencing token (a stale token is ErrLeaseLost) and
// keeps only the overrides of the storage: a task whose expiry passed
// while it ran is archived instead of waiting again, and a task an
// operator canceled while it ran stays canceled (see Canceled).
//
// Build one with Completed, Retrying, Archived or Released.
type Decision struct {
	SessionID string
	Lease     LeaseRef
	Kind      DecisionKind
	// Now is when the decision was made.
	Now time.Time
	// Due is when a Retrying task becomes pending again.
	Due time.Time
	// Error is the failure recorded with Retrying and Archived.
	Error string
	// Result is the result bytes kept with Completed.
	Result []byte
	// Verdict is set when a worker's Result decided: the attempt counts as
	// processed, and as failed unless Completed.
	Verdict bool
}

// Completion is the outcome of one decision of a CompleteBatch: the state
// the task is in after, or why the decision was not applied.
type Completion struct {
	State State
	Err   error
}

// DecisionKind is the state a Decision moves a task to.
type DecisionKind uint8

// The kinds of decision.
const (
	// DecideComplete: COMPLETED, Result kept.
	DecideComplete DecisionKind = iota + 1
	// DecideRetry: RETRY until Due, with one more retry counted and Error
	// recorded (Due at Now makes it PENDING at once).
	DecideRetry
	// DecideArchive: ARCHIVED (dead-lettered) with Error.
	DecideArchive
	// DecideRelease: PENDING at once, the retry count unchanged.
	DecideRelease
	// DecideCancel: CANCELED.
	DecideCancel
)

// Completed decides that a worker's attempt succeeded.
func Completed(session string, ref LeaseRef, now time.Time, result []byte) Decision {
	return Decision{SessionID: session, Lease: ref, Kind: DecideComplete, Now: now, Result: result, Verdict: true}
}

// Retrying decides that the task runs again at due, one more retry counted.
func Retrying(session string, ref LeaseRef, now, due time.Time, errMsg string) Decision {
	return Decision{SessionID: session, Lease: ref, Kind: DecideRetry, Now: now, Due: due, Error: errMsg}
}

// Archived decides that the task fails for good.
func Archived(session string, ref LeaseRef, now time.Time, errMsg string) Decision {
	return Decision{SessionID: session, Lease: ref, Kind: DecideArchive, Now: now, Error: errMsg}
}

// Released decides that the task goes back un-run, with no penalty.
func Released(session string, ref LeaseRef, now time.Time) Decision {
	return Decision{SessionID: session, Lease: ref, Kind: DecideRelease, Now: now}
}

// WithVerdict marks d as decided by a worker's Result.
func (d Decision) WithVerdict() Decision {
	d.Verdict = true
	return d
}

// CanceledMessage prefixes the last error of a task that was canceled by
// an operator while it ran and then failed.
const CanceledMessage = "canceled by an operator"

// Canceled is what d becomes for a task an operator canceled while it ran
// (CONTRACT.md, CancelTask): a success still completes it; a failure the
// worker reported archives it, its error saying it was canceled; anything
// else (RELEASED, a closed stream, a lapsed lease) cancels it, never to be
// redelivered. Every engine applies this rule when it finds the mark.
func (d Decision) Canceled() Decision {
	switch {
	case d.Kind == DecideComplete:
		return d
	case d.Verdict && (d.Kind == DecideRetry || d.Kind == DecideArchive):
		d.Kind = DecideArchive
		if d.Error == "" {
			d.Error = CanceledMessage
		} else {
			d.Error = CanceledMessage + "; the attempt failed: " + d.Error
		}
		return d
	}
	d.Kind = DecideCancel
	return d
}

// Messages an engine records when its own mechanisms end a task.
const (
	// ExpiredMessage: a waiting task's expiry passed before it ran.
	ExpiredMessage = "expired before it could run"
	// DeadlinePassedMessage: a task's deadline passed before it ran.
	DeadlinePassedMessage = "deadline passed before the task could run"
)
