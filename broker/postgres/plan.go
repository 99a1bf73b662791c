package postgres

import "slices"

// The planner does not see what a held snapshot does to an index. While a
// transaction holds one (a long report, pg_dump), VACUUM removes no entry
// newer than it, so a range of a partial or leading-state index (the
// PENDING tasks of a queue, the ACTIVE ones) holds the entry of every
// task that passed through it since, dead, and reading the range whole
// visits each one. The statistics still say how many tasks are in the
// state now: a few, at a few hundred tasks a second. So a hot statement
// whose plan reads such a range whole looks cheap, is made once per
// connection and kept, and reads tens of thousands of dead entries a call
// under a held snapshot. Measured in a SOAK at 800 tasks/s with a
// snapshot held: a lease planned over the listing index read 450,000
// buffers a call (dispatch all but stopped), and a batch of 29 Results
// planned over the lease index 6,720.
//
// The statements that must not take such a plan turn the planner's
// methods that lead there off for their transaction (SET LOCAL, sent in
// one write with the next statement): a plan without them is then taken
// whenever one exists, whatever the statistics said. A method turned off
// adds a cost of 10^10 to each plan that still uses one (the walks' final
// merge sorts), far past the cost at which PostgreSQL compiles a query
// with JIT (a third of a second a call, more than the statement): the
// engine's connections run with jit off (engine.go).
const (
	// planSort: a walk of a ready line wants its rows in the order of
	// the index it walks from its floors (scanfloor.go), which no other
	// index gives; without sorting, the listing index (queue, state, id)
	// is no way to the PENDING tasks.
	planSort = "enable_sort"
	// planSeqScan: a statement that finds its rows by id goes by the
	// primary key, and tests the state in a form no partial index is
	// proved from (activeByID); without sequential scans, a plan made
	// while the table was small does not scan it whole once it grew.
	planSeqScan = "enable_seqscan"
)

// activeByID tests that the row t is ACTIVE in a form that does not make
// the lease index (conveyor_tasks_lease, WHERE state = 3) a way to it, for
// the statements that find rows by id.
const activeByID = `t.state + 0 = 3`

// A prepared statement's first five runs on a connection are planned for
// their arguments; after that PostgreSQL keeps to its generic plan only
// while that plan looks no costlier than the custom ones did. A statement
// over unnest of its array arguments is estimated at ten rows an array in
// the generic plan and at the arrays' length in a custom one, so on a
// connection whose early calls carried fewer rows the custom plans look
// cheaper, and every call is planned again: measured in W4 (Results of
// about seven tasks a batch), a third of the batched completions were
// planned again, at 0.4 ms each, 4% of one core of the database. The
// statements that find their rows by id have one plan whatever their
// arrays hold (the primary key, once for each element), so they take the
// generic one from the first call. So do the leases: with sorts off, a
// walk has one way down its index whatever its arguments, and PostgreSQL's
// own choice flipped between runs (in one of four W3 runs, and in one of
// two runs of BenchmarkLeaseBatch, every lease was planned again, at 0.5
// to 0.9 ms a call, as long as the statement took to run).

// planGenerically makes the transaction's statements, until planAsUsual,
// take their generic plans.
func (t *txn) planGenerically() {
	if !t.generic {
		t.generic = true
		t.tx.sendAhead("SET LOCAL plan_cache_mode = force_generic_plan")
	}
}

// planAsUsual gives the planner back its own choice between custom and
// generic plans (the setting the session started with), if
// planGenerically took it.
func (t *txn) planAsUsual() {
	if t.generic {
		t.generic = false
		t.tx.sendAhead("SET LOCAL plan_cache_mode TO DEFAULT")
	}
}

// planWithout turns method off for the rest of the transaction.
func (t *txn) planWithout(method string) {
	if !slices.Contains(t.plannedWithout, method) {
		t.plannedWithout = append(t.plannedWithout, method)
		t.tx.sendAhead("SET LOCAL " + method + " = off")
	}
}
