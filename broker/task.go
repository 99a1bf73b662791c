package broker

import "time"

// Task is the full view of one task: what the producer gave and where the
// task is in its lifecycle.
type Task struct {
	ID          string
	Queue       string
	Type        string
	Payload     []byte
	ContentType string
	Metadata    map[string]string
	// Options are the producer's options exactly as sent, encoded (the
	// protocol's TaskOptions). Engines store and return them and never
	// read them: every option an engine acts on is a field of its own.
	Options []byte

	State     State
	Priority  int32
	Retried   int32
	MaxRetry  int32
	LastError string
	// Errors holds the latest failed attempts, oldest first (at most
	// MaxErrorHistory).
	Errors        []AttemptError
	EnqueuedAt    time.Time
	NextProcessAt time.Time
	StartedAt     time.Time
	CompletedAt   time.Time
	// ExpiresAt archives the task if it is still waiting then; zero never.
	ExpiresAt time.Time
	// Deadline is the time after which the task must not run; zero: none.
	Deadline time.Time
	// Timeout bounds one attempt; zero: none.
	Timeout time.Duration
	// RetryPolicy is the task's own retry backoff; nil: the server's.
	RetryPolicy *RetryPolicy
	// Retention is how long the task is kept once COMPLETED; nil: the
	// server's default.
	Retention      *time.Duration
	UniqueKey      string
	Group          string
	ConcurrencyKey string
	// AtMostOnce: the task runs only under start authorization.
	AtMostOnce bool
	DependsOn  []Dependency
	// Dependents lists the tasks that depend on this one (GetTask only, at
	// most MaxDependentsShown).
	Dependents      []TaskLink
	Result          []byte
	ProgressPercent int32
	ProgressMessage string
	// SessionID and LeaseToken name the current lease of an ACTIVE task.
	SessionID  string
	LeaseToken uint64
	// Existed is set on a task EnqueueTx returns in place of an item
	// whose ID already named a task (stored before, or an earlier item of
	// the call): the item was a no-op, and the call did not enqueue it.
	Existed bool
}

// AttemptError is one failed attempt of a task.
type AttemptError struct {
	Attempt int32
	Message string
	At      time.Time
}

// MaxErrorHistory is how many failed attempts a task remembers.
const MaxErrorHistory = 10

// RetryStrategy is the shape of a retry backoff curve.
type RetryStrategy uint8

// The strategies, numbered as the wire's RetryStrategy.
const (
	RetryDefault RetryStrategy = iota
	RetryExponential
	RetryLinear
	RetryFixed
)

// RetryPolicy is a task's own retry backoff. A zero Base or Max means the
// server's default for it.
type RetryPolicy struct {
	Strategy RetryStrategy
	Base     time.Duration
	Max      time.Duration
}

// OnFailure says what a dependent task does when a dependency fails
// terminally (is ARCHIVED or CANCELED) instead of succeeding.
type OnFailure uint8

// The policies, numbered as the wire's OnFailure (0 means OnFailureBlock).
const (
	OnFailureDefault OnFailure = iota
	OnFailureBlock
	OnFailureCascadeCancel
	OnFailureContinue
)

// Dependency is one entry of a task's depends_on list.
type Dependency struct {
	TaskID    string
	OnFailure OnFailure
	// State is the dependency's state when the task was read (GetTask
	// fills it; 0 when it is gone).
	State State
}

// TaskLink names another task and its state when the view was taken.
type TaskLink struct {
	TaskID string
	State  State
}

// MaxDependentsShown bounds how many dependents GetTask lists.
const MaxDependentsShown = 1000

// NewTask is a validated task ready to store: the server has applied every
// default, resolved every relative time and chosen the initial state.
type NewTask struct {
	// ID is the task's ULID; empty lets the engine assign one.
	ID          string
	Queue       string
	Type        string
	Payload     []byte
	ContentType string
	Metadata    map[string]string
	// Options are kept verbatim for display (see Task.Options).
	Options []byte

	// State is the initial state the server chose: SCHEDULED (until
	// ProcessAt), PENDING, AGGREGATING (Group) or BLOCKED (DependsOn, with
	// or without a Group or ProcessAt). A BLOCKED task whose dependencies
	// are done becomes AGGREGATING, joining its group, when it has a
	// Group, SCHEDULED when its ProcessAt is still to come, else PENDING.
	State    State
	Priority int32
	MaxRetry int32
	// ProcessAt is when a SCHEDULED task becomes due, and when a BLOCKED
	// one is due at the earliest.
	ProcessAt time.Time
	// UniqueKey, when set, must not be held by another incomplete task.
	UniqueKey string
	// UniqueUntil ends the claim early; zero holds it until the task completes.
	UniqueUntil time.Time
	ExpiresAt   time.Time
	Deadline    time.Time
	Timeout     time.Duration
	RetryPolicy *RetryPolicy
	Retention   *time.Duration
	Group       string
	// ConcurrencyKey limits how many tasks sharing it run at once.
	ConcurrencyKey string
	// AtMostOnce: the task goes only to a session that asks before it
	// starts it (Route.StartAuthorization), and is never run twice
	// (StartAuthorizer). It is not combined with Group.
	AtMostOnce bool
	DependsOn  []Dependency
}
