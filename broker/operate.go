package broker

import (
	"math"
	"time"
)

// Action is an operator action on tasks.
type Action uint8

// The actions, numbered as the wire's TaskAction.
const (
	ActionCancel Action = iota + 1
	ActionDelete
	ActionRun
	ActionArchive
)

// String is the action's lower-case name.
func (a Action) String() string {
	switch a {
	case ActionCancel:
		return "cancel"
	case ActionDelete:
		return "delete"
	case ActionRun:
		return "run"
	case ActionArchive:
		return "archive"
	}
	return "action(" + itoa(int(a)) + ")"
}

// Applies is the contract's rule for which states an action applies to
// (CONTRACT.md, "Task listing and actions"); every engine checks it under
// its lock, against the state the task is in then:
//   - cancel: any state that is not terminal (an ACTIVE task is marked and
//     its worker told; its eventual Result decides, see Decision.Canceled);
//   - run: SCHEDULED, RETRY, BLOCKED (dependencies ignored), ARCHIVED,
//     CANCELED;
//   - archive: any state that is neither terminal nor ACTIVE;
//   - delete: any state but ACTIVE.
func (a Action) Applies(s State) bool {
	switch a {
	case ActionCancel:
		return s.Valid() && !s.Terminal()
	case ActionRun:
		switch s {
		case StateScheduled, StateRetry, StateBlocked, StateArchived, StateCanceled:
			return true
		}
	case ActionArchive:
		return s.Valid() && !s.Terminal() && s != StateActive
	case ActionDelete:
		return s.Valid() && s != StateActive
	}
	return false
}

// ActParams applies one action to tasks, each on its own.
type ActParams struct {
	Action Action
	IDs    []string
	Now    time.Time
	// From, when set, is the state the caller found the tasks in (a bulk
	// action over one state's listing): a task in another state by the
	// time the action reaches it is left alone, with ErrInvalidState.
	From State
}

// ActResult is the outcome of an action on one task.
type ActResult struct {
	// Err is ErrNotFound, ErrInvalidState (the action does not apply to
	// the task's state), ErrAlreadyExists (a task run again whose unique
	// key another task took meanwhile), or nil.
	Err error
	// Running is set when a cancel marked an ACTIVE task: the lease whose
	// session must be sent Cancel.
	Running *LapsedLease
}

// OperatorMessages are the errors recorded when an operator ends a task.
const (
	// ArchivedByOperator is the last error of a task an operator archived.
	ArchivedByOperator = "archived by an operator"
)

// ListParams selects a page of tasks of one queue.
type ListParams struct {
	Queue string
	// State filters by state; StateUnspecified lists every state.
	State State
	// Type filters by task type (exact); empty matches every type.
	Type string
	// Search keeps tasks whose id, a metadata value or payload contains it.
	Search string
	// Group keeps the tasks enqueued with this aggregation group (exact);
	// empty matches every task.
	Group string
	// Cursor continues a listing (a previous call's Next); empty starts it.
	Cursor string
	// Descending lists in reverse id order, newest first: Limit 1 finds
	// the greatest id the listing holds. A cursor continues only a listing
	// of the same direction.
	Descending bool
	// Limit bounds the page (the engine may return fewer, e.g. to bound
	// the bytes of one answer).
	Limit int
	// Brief lists the tasks without what can make them large (payload,
	// result, metadata, errors, last error, progress message), for a
	// caller that needs only their ids and states, a bulk action: a page
	// then holds Limit tasks however large they are. A search still looks
	// at all of them.
	Brief bool
}

// ListPage is one page of a listing. Tasks are in id order (reversed,
// Descending), whatever their types and, in a listing of every state, their states; a task
// present throughout a listing is never skipped and none is returned
// twice, even if it changes state between pages (in a listing of every
// state: a listing of one state shows the tasks in it when each page is
// read).
type ListPage struct {
	Tasks []*Task
	// Next continues the listing; empty on the last page.
	Next string
}

// QueueConfig is a queue's dispatch limits, group policy and bound. Zero
// fields mean the default (ConcurrencyLimit 1; no MaxActive cap; no rate
// limit; the server's group policy; no MaxWaiting bound).
type QueueConfig struct {
	ConcurrencyLimit int32
	MaxActive        int32
	RatePerSecond    int32
	RateBurst        int32
	Group            GroupPolicy
	// MaxWaiting bounds the queue's waiting tasks (Counts.Waiting): a new
	// task that would take the queue past it is refused (ErrQueueFull).
	// Tasks already in the queue are never refused: a retry, a released or
	// reclaimed task, RunTask, a dependent released, a group fired.
	MaxWaiting int64
	// Push is the queue's HTTP push endpoint (an empty URL: none). The
	// engine only stores it; the server invokes it.
	Push PushEndpoint
}

// PushEndpoint is a queue's HTTP push endpoint as stored: a zero
// Concurrency or Timeout means the server's default.
type PushEndpoint struct {
	URL         string
	Concurrency int32
	Timeout     time.Duration
}

// Admits is the rule of the bound every engine applies, under its lock,
// when new tasks enter a queue: n more fit one whose tasks waiting (as
// Counts.Waiting, counting enqueues not durable yet) number waiting.
func (c QueueConfig) Admits(waiting int64, n int) bool {
	return c.MaxWaiting <= 0 || waiting+int64(n) <= c.MaxWaiting
}

// Room is how many more new tasks fit a queue whose tasks waiting number
// waiting: 0 when it is full or past its bound (lowered under what it
// holds), math.MaxInt64 when it has no bound.
func (c QueueConfig) Room(waiting int64) int64 {
	if c.MaxWaiting <= 0 {
		return math.MaxInt64
	}
	return max(c.MaxWaiting-waiting, 0)
}

// MaxGroupBytes is a trigger every group has besides its policy's: a group
// fires once its members' stored specs (payloads, metadata, names) reach
// 16 MiB, so that its BatchDispatch, one frame, stays well within the
// 32 MiB a frame may carry, and the server never builds one of gigabytes
// (10,000 members of 1 MiB).
const MaxGroupBytes = 16 << 20

// GroupPolicy says when an aggregation group fires: at whichever trigger
// comes first (MaxGroupBytes is one too). A zero field means the server's
// default.
type GroupPolicy struct {
	MaxSize     int32
	MaxDelay    time.Duration
	GracePeriod time.Duration
}

// WithDefaults fills the zero fields of p from d.
func (p GroupPolicy) WithDefaults(d GroupPolicy) GroupPolicy {
	if p.MaxSize <= 0 {
		p.MaxSize = d.MaxSize
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = d.MaxDelay
	}
	if p.GracePeriod <= 0 {
		p.GracePeriod = d.GracePeriod
	}
	return p
}

// Full is the contract's rule for when a group fires by size, whatever
// the time: once its members number MaxSize (a MaxSize of 0, a policy
// with no default filled in, sets no size) or their stored specs take
// MaxGroupBytes. Every engine applies it as a member joins, and when a
// queue's policy changes (a group the new size fills fires at once).
func (p GroupPolicy) Full(members int, bytes int64) bool {
	return p.MaxSize > 0 && members >= int(p.MaxSize) || bytes >= MaxGroupBytes
}

// FiresAt is the contract's rule for when a group fires by time: the
// earlier of its first member's enqueue plus MaxDelay and its latest
// member's plus GracePeriod. (A group also fires once it is Full,
// whatever the time.) Every engine computes it the same way.
func (p GroupPolicy) FiresAt(first, last time.Time) time.Time {
	a, b := first.Add(p.MaxDelay), last.Add(p.GracePeriod)
	if b.Before(a) {
		return b
	}
	return a
}

// GroupLeaseParams asks for fired aggregation groups of one queue for one
// session, of the task types the session handles as batches.
type GroupLeaseParams struct {
	SessionID string
	Queue     string
	Types     []string
	// N is how many groups at most (each is one concurrency slot).
	N   int
	Now time.Time
	TTL time.Duration
	// LimitGrace is LeaseParams.LimitGrace, for each member.
	LimitGrace time.Duration
}

// GroupLease is one fired group, leased: every member has its own lease,
// all with the same expiry.
type GroupLease struct {
	Queue, Group, Type string
	// Leases are the members', each with its own lease; a member's
	// Task.NextProcessAt is when the group fired (or the member's own due
	// time, if later): when it became ready to run.
	Leases []Lease
}

// GroupInfo describes an aggregation group waiting to be delivered.
type GroupInfo struct {
	Queue, Group, Type string
	Size               int
	First, Last        time.Time
	// FiresAt is when the group fires by time; for a group that fired and
	// waits for a worker handling its type, when it fired.
	FiresAt time.Time
	Fired   bool
}
