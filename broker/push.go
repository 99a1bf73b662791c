package broker

// What a restart makes of an attempt a push endpoint was running
// (LeaseParams.Push).

// InterruptedPushError is the last_error of an attempt counted because a
// server restart (or a node's death) found it sent to a push endpoint and
// not answered.
const InterruptedPushError = "the server stopped while the push endpoint ran the attempt; it may have run"

// InterruptedPush is what a restart makes of a task leased to a push
// endpoint (LeaseParams.Push) and not answered: the attempt counts,
// as a failure; the task is PENDING again at once, or ARCHIVED when that
// spent its last retry. It returns the task's new retry count and state.
func InterruptedPush(retried, maxRetry int32) (int32, State) {
	if retried >= maxRetry {
		return retried, StateArchived
	}
	return retried + 1, StatePending
}
