package broker

// State is a task's lifecycle state. The values are numbered as the wire
// protocol's TaskState (conveyor.v1), which makes the server's conversion a
// plain cast, but they belong to the contract: engines store them and never
// see the wire type.
type State uint8

// The states; see the package doc for the machine they form.
const (
	StateUnspecified State = iota
	StateScheduled
	StatePending
	StateActive
	StateRetry
	StateCompleted
	StateArchived
	StateCanceled
	StateAggregating
	StateBlocked
)

// NumStates sizes arrays indexed by State.
const NumStates = 10

var stateNames = [NumStates]string{"unspecified", "scheduled", "pending", "active", "retry",
	"completed", "archived", "canceled", "aggregating", "blocked"}

// String is the state's lower-case name ("pending").
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state(" + itoa(int(s)) + ")"
}

// Valid reports whether s names a state (not StateUnspecified).
func (s State) Valid() bool { return s > StateUnspecified && s < NumStates }

// Waiting reports whether a task in s waits to run, and so can expire:
// SCHEDULED, PENDING, RETRY, AGGREGATING and BLOCKED.
func (s State) Waiting() bool {
	switch s {
	case StateScheduled, StatePending, StateRetry, StateAggregating, StateBlocked:
		return true
	}
	return false
}

// Terminal reports whether s is final: COMPLETED, ARCHIVED or CANCELED.
func (s State) Terminal() bool {
	return s == StateCompleted || s == StateArchived || s == StateCanceled
}

// Counts holds a number per state, indexed by State.
type Counts [NumStates]int64

// Waiting is how many tasks wait to run: those in SCHEDULED, PENDING,
// RETRY, AGGREGATING and BLOCKED together (what QueueConfig.MaxWaiting
// bounds).
func (c Counts) Waiting() int64 {
	return c[StateScheduled] + c[StatePending] + c[StateRetry] + c[StateAggregating] + c[StateBlocked]
}

// Outcome is a worker's verdict on one attempt, numbered as the wire's
// TaskOutcome.
type Outcome uint8

// The outcomes a worker reports (protocol §5.8).
const (
	OutcomeUnspecified Outcome = iota
	OutcomeSuccess
	OutcomeRetry
	OutcomeSkipRetry
	OutcomeReleased
)

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	neg := n < 0
	if neg {
		n = -n
	}
	for n > 0 {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
	}
	if neg {
		i--
		b[i] = '-'
	}
	return string(b[i:])
}
