package postgres

import "time"

// Time floors bound where a timer loop's walks of its indexes start: the
// promoter's of the due and expiry indexes (conveyor_tasks_due,
// conveyor_tasks_expire), the purge's of the own retentions' and the
// finished tasks' (conveyor_tasks_purge_own, conveyor_tasks_ended). Each
// walks a range by time from its start, and the entries of the tasks it
// moved or deleted stay at the head of the range, dead, until VACUUM
// removes them; while a transaction holds an old snapshot VACUUM can
// remove none, and each round then read past every task handled since
// the snapshot began (the purge: 22,000 buffers a call two minutes into a
// hold at 800 tasks/s). The floors skip them, as the scan floors do the
// ready line's (scanfloor.go).
//
// The rules that keep them safe:
//   - A round that handled less than its limit left nothing it could see
//     below the earliest time it then read of each range (or its cutoff,
//     when the range held nothing it could see past it): the range's
//     floor rises to it.
//   - A row with a time below a floor can still appear: a transaction
//     that ended a task, or made one due, at an earlier time and committed
//     after the round read (a batch of Results applied late, another
//     node's clock). Every commit reports the earliest time it added to
//     each loop's ranges, this node's own in applyCommitted and the other
//     nodes' by their notifications (timersAddedLocked), and that lowers
//     the floors; one reported while a round runs caps what the round may
//     raise them to.
//   - What a lost report would strand, a walk from the start finds: the
//     floors drop to 0 at a resync and once every timeFullEvery.

// maxTimeRanges is the most ranges a loop's floors hold.
const maxTimeRanges = 3

// timeRanges holds a time per range of a loop, by range.
type timeRanges [maxTimeRanges]int64

// The purge's ranges: the own retentions', then one per retention class.
const (
	rangeOwn   = 0
	rangeEnded = 1
)

// The promoter's ranges: the due times and the expiries.
const (
	rangeDue    = 0
	rangeExpire = 1
)

// timeFullEvery is how often a loop walks its ranges from their start.
const timeFullEvery = time.Minute

// timeFloors are one loop's floors, under e.mu.
type timeFloors struct {
	// at holds each range's floor: no row of it lies below (0: none).
	at timeRanges
	// round is set while the loop runs a round with the floors; low holds
	// the earliest time reported to each range since it began (0: none).
	round bool
	low   timeRanges
	// fullAt is when a round last walked from the start.
	fullAt int64
}

// lowerLocked lowers range r's floor to a time a commit added (0: none).
func (f *timeFloors) lowerLocked(r int, at int64) {
	if at == 0 {
		return
	}
	f.at[r] = min(f.at[r], at)
	if f.round {
		earliest(&f.low[r], at)
	}
}

// resetLocked drops the floors to 0: the next round walks from the start.
func (f *timeFloors) resetLocked() { f.at = timeRanges{} }

// startRoundLocked returns the floors a round at now walks from, and
// whether it owns the round (only the owner may raise them). Every
// timeFullEvery (or when the clock went back past the last full walk)
// they drop to 0.
func (f *timeFloors) startRoundLocked(now int64) (timeRanges, bool) {
	if f.round {
		return timeRanges{}, false // a round already runs: walk from the start
	}
	if now-f.fullAt >= int64(timeFullEvery) || now < f.fullAt {
		f.resetLocked()
		f.fullAt = now
	}
	f.round, f.low = true, timeRanges{}
	return f.at, true
}

// endRoundLocked ends the round: one that left nothing it could see below
// to in each range (done) raises the range's floor to it, or to the
// earliest time reported to the range meanwhile, if lower.
func (f *timeFloors) endRoundLocked(to timeRanges, done bool) {
	f.round = false
	if !done {
		return
	}
	for r, at := range to {
		if f.low[r] != 0 {
			at = min(at, f.low[r])
		}
		f.at[r] = max(f.at[r], at)
	}
}

// timerFloorsLocked lowers the loops' floors to the times a commit added:
// promoteAt to the promoter's ranges (it is the earliest due time or
// expiry), purgeOwnAt and ended to the purge's.
func (e *Engine) timerFloorsLocked(promoteAt, purgeOwnAt int64, ended [numClasses]int64) {
	e.promoteFloors.lowerLocked(rangeDue, promoteAt)
	e.promoteFloors.lowerLocked(rangeExpire, promoteAt)
	e.purgeFloors.lowerLocked(rangeOwn, purgeOwnAt)
	for c, at := range ended {
		e.purgeFloors.lowerLocked(rangeEnded+c, at)
	}
}
