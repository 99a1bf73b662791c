package broker

import (
	"context"
	"slices"
	"strings"
	"time"
)

// Route says which ready tasks a lease may take: those of a type the
// session can run, at-most-once tasks only for a session that asks
// before it starts one. The zero Route takes every type but no
// at-most-once task, so that a caller that never heard of start
// authorization (a push endpoint, an older worker) is never given one.
type Route struct {
	// Types, when not nil, are the only task types the lease may take.
	Types []string
	// Except are types the lease must pass over even when Types allows
	// them (newer releases take them: docs/concurrency.md).
	Except []string
	// StartAuthorization: the session asks (Start) before it runs an
	// at-most-once task, so it may be given one.
	StartAuthorization bool
}

// WorkerRoute is the route of a worker that declared types (empty: every
// type) and batch types (a batch handler also serves a single delivery),
// and whether it asks before it starts an at-most-once task.
func WorkerRoute(types, batchTypes []string, startAuthorization bool) Route {
	r := Route{StartAuthorization: startAuthorization}
	if len(types) > 0 {
		r.Types = append(slices.Clone(types), batchTypes...)
	}
	return r
}

// Takes reports whether a lease routed by r may take a task of type typ,
// at most once or not. Engines apply it, or mirror it in their queries
// with it as the oracle of their tests.
func (r Route) Takes(typ string, atMostOnce bool) bool {
	if atMostOnce && !r.StartAuthorization {
		return false
	}
	if r.Types != nil && !slices.Contains(r.Types, typ) {
		return false
	}
	return !slices.Contains(r.Except, typ)
}

// Open reports whether r takes every task, at-most-once ones included:
// an engine serves such a lease exactly as it did before routing existed.
func (r Route) Open() bool { return r.Types == nil && len(r.Except) == 0 && r.StartAuthorization }

// StartParams asks to commit the start of one leased at-most-once
// attempt.
type StartParams struct {
	SessionID string
	Lease     LeaseRef
	Now       time.Time
}

// StartAuthorizer is the part of the contract that serves at-most-once
// tasks (TaskOptions.at_most_once).
type StartAuthorizer interface {
	// AuthorizeStart commits, durably before it returns, that the attempt
	// p.Lease names has started: if it then ends with no verdict (its
	// session releases it, its lease lapses, the server restarts), the
	// task is ARCHIVED with an "outcome unknown:" error instead of being
	// run again (Decision.StartAuthorized, which every engine applies). It fails
	// with ErrLeaseLost when the lease is not current (it lapsed, was
	// released or reassigned) and with ErrInvalidState when the task was
	// canceled while it waited to start. A task that is not at most once
	// is authorized with nothing written.
	AuthorizeStart(ctx context.Context, p StartParams) error
}

// OutcomeUnknownPrefix begins the last_error of an at-most-once task
// whose authorized attempt ended with no verdict.
const OutcomeUnknownPrefix = "outcome unknown: "

// Why an authorized attempt's outcome is unknown, by how it ended.
const (
	UnknownReleased = "the attempt was handed back after its start was authorized"
	UnknownLapsed   = "the lease lapsed after the start was authorized"
	UnknownRestart  = "the server restarted while the authorized attempt ran"
)

// StartAuthorized is what d becomes for an at-most-once task whose current
// attempt's start was authorized (StartAuthorizer): a worker's verdict
// stands; anything else (RELEASED, a closed stream, a lapsed lease) is
// ARCHIVED with an "outcome unknown:" error, never run again, for an
// operator to run or not (RunTask). Every engine applies this rule when it
// finds the mark, before Canceled (a canceled task is then CANCELED).
func (d Decision) StartAuthorized() Decision {
	if d.Verdict || d.Kind == DecideArchive && strings.HasPrefix(d.Error, OutcomeUnknownPrefix) {
		return d // a verdict, or the rule applied already
	}
	why := UnknownLapsed
	if d.Kind == DecideRelease {
		why = UnknownReleased
	}
	d.Kind = DecideArchive
	d.Error = OutcomeUnknownPrefix + why
	return d
}

// Kind is what routing tells tasks apart by.
type Kind struct {
	Type       string
	AtMostOnce bool
}

// MaxWaitingKinds bounds how many kinds WaitingKinds reports.
const MaxWaitingKinds = 100

// KindLister reports what waits in a queue, so that an operator can see
// which types no live worker can take.
type KindLister interface {
	// WaitingKinds lists, sorted by type then at-most-once-ness, at most
	// MaxWaitingKinds kinds among queue's PENDING tasks: at least every
	// kind of ready task a routed lease passed over that still waits, and
	// possibly others that are ready.
	WaitingKinds(ctx context.Context, queue string) ([]Kind, error)
}
