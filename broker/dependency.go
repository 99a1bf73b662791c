package broker

// DepOutcome is what the state of one of a task's dependencies means for
// the task.
type DepOutcome uint8

// The outcomes of a dependency.
const (
	// DepWaits: the dependency has not ended; the task waits for it.
	DepWaits DepOutcome = iota
	// DepSatisfied: the dependency completed, or failed under
	// OnFailureContinue; the task counts it as done.
	DepSatisfied
	// DepBlocks: the dependency failed under OnFailureBlock (the
	// default); the task stays BLOCKED for good, until an operator runs,
	// cancels or deletes it.
	DepBlocks
	// DepCancels: the dependency failed under OnFailureCascadeCancel; the
	// task is CANCELED in turn, and so its own dependents are told.
	DepCancels
)

// DependencyOutcome is the contract's rule for what a dependency in state
// dep means for a task that depends on it under policy: a dependency that
// has not ended (not terminal) keeps the task waiting; one that ended
// COMPLETED satisfies it; one that ended ARCHIVED or CANCELED (failed)
// satisfies it under OnFailureContinue, cancels it under
// OnFailureCascadeCancel and blocks it under any other policy
// (OnFailureBlock, or OnFailureDefault, which means it). Every engine
// applies it at enqueue, to the dependencies that ended already, and to
// each dependent of a task that ends.
func DependencyOutcome(policy OnFailure, dep State) DepOutcome {
	switch {
	case !dep.Terminal():
		return DepWaits
	case dep == StateCompleted || policy == OnFailureContinue:
		return DepSatisfied
	case policy == OnFailureCascadeCancel:
		return DepCancels
	}
	return DepBlocks
}
