package broker

import "sync"

// LeaseParker is an engine that can lease tasks to a session in the
// transaction of the enqueue that makes them ready. A session parks a
// lease for the slots it has free and does not lease for itself; each
// enqueue on this node of tasks it takes claims some of those slots,
// leases in its own transaction (by the same rules as Lease: the queue's
// line in order, its caps, keys and routes) and, once it committed,
// tells the session. The tasks then skip the lease's own transaction and
// the wake-up before it: on PostgreSQL a transaction and its commit cost
// far more than the rows in it (docs/benchmarks.md). Without it, the
// session leases after TasksReady wakes it, as always: parking changes
// when a task is leased, never what may be leased.
type LeaseParker interface {
	// ParkLease parks pl, which offers no slot until its session's first
	// Offer. A session parks one, for its life, and changes what it
	// offers.
	ParkLease(pl *ParkedLease)
	// UnparkLease drops pl, which its session then closes.
	UnparkLease(pl *ParkedLease)
}

// ParkedLease is a session's standing offer of free slots to the
// enqueues: its parameters (each enqueue's claim leases as of its own
// time), the slots open to claims, and what the claims granted, until the
// session collects it. Several enqueues may hold claims at once; the
// session and the engine hand slots over under the lease's own lock, so
// that a slot is claimed at most once and never while the session uses
// it.
type ParkedLease struct {
	// Params are the lease's: the session, one pick per queue (N is
	// ignored: claims take what is open), the TTL, the grace and the
	// route.
	Params LeaseParams
	// granted is called each time a claim settles.
	granted func()

	mu sync.Mutex
	// open is how many slots claims may take; claimed how many the claims
	// not collected yet took (their leases may be fewer); pending how many
	// claims have not settled, idle closed when the last one does.
	open, claimed, pending int
	closed                 bool
	idle                   chan struct{}
	// mark is the session's mark on the slots it offers now, given back
	// with what claims on them granted (Collect).
	mark    uint64
	settled []settledClaim
}

// Claim is slots an enqueue claimed of a parked lease, to Settle.
type Claim struct {
	// N is how many slots, each for one task.
	N    int
	mark uint64
}

type settledClaim struct {
	Claim
	leases []Lease
}

// NewParkedLease returns a lease with no slots open yet (Offer), whose
// granted is called (outside any engine lock; it must not block) each
// time a claim settles, with leases or without.
func NewParkedLease(p LeaseParams, granted func()) *ParkedLease {
	return &ParkedLease{Params: p, granted: granted}
}

// Claim is the engine's: it claims up to n of the open slots. A claim of
// none (N 0) needs no Settle; closed reports that the lease will never
// have any again.
func (pl *ParkedLease) Claim(n int) (c Claim, closed bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	n = min(n, pl.open)
	if pl.closed || n <= 0 {
		return Claim{}, pl.closed
	}
	pl.open -= n
	pl.claimed += n
	if pl.pending == 0 {
		pl.idle = make(chan struct{})
	}
	pl.pending++
	return Claim{N: n, mark: pl.mark}, false
}

// Settle is the engine's, once per claim of any slots, after its
// enqueue's transaction ended: what it leased (none when it failed).
func (pl *ParkedLease) Settle(c Claim, leases []Lease) {
	pl.mu.Lock()
	pl.settled = append(pl.settled, settledClaim{Claim: c, leases: leases})
	if pl.pending--; pl.pending == 0 {
		close(pl.idle)
	}
	pl.mu.Unlock()
	pl.granted()
}

// Collect is the session's: it returns what the settled claims granted,
// and the highest mark of the offers they claimed from. Their slots are
// the session's again: the leases hold some, the others are free.
func (pl *ParkedLease) Collect() (leases []Lease, mark uint64) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	for _, c := range pl.settled {
		leases = append(leases, c.leases...)
		mark = max(mark, c.mark)
		pl.claimed -= c.N
	}
	pl.settled = nil
	return leases, mark
}

// Offer is the session's: of free, the slots it has free (the collected
// leases counted as taken, the claims' slots not), it keeps up to keep
// for leases of its own, and opens the rest to claims, marked mark. It
// returns how many it kept, and how many slots the claims not collected
// hold.
func (pl *ParkedLease) Offer(free, keep int, mark uint64) (kept, claimed int) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	avail := max(free-pl.claimed, 0)
	kept = min(keep, avail)
	pl.open, pl.mark = avail-kept, mark
	if pl.closed {
		pl.open = 0
	}
	return kept, pl.claimed
}

// Open is how many slots claims may take now.
func (pl *ParkedLease) Open() int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.open
}

// Close is the session's, as it ends: no claim is made from then on. It
// waits for the claims in their transactions and returns what every
// claim not collected granted, for the session to hand back.
func (pl *ParkedLease) Close() []Lease {
	pl.mu.Lock()
	pl.closed, pl.open = true, 0
	idle, wait := pl.idle, pl.pending > 0
	pl.mu.Unlock()
	if wait {
		<-idle
	}
	leases, _ := pl.Collect()
	return leases
}
