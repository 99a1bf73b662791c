package postgres

import "time"

// A purge walks three index ranges from their start: the tasks with a
// retention of their own by purge_at (conveyor_tasks_purge_own), and the
// COMPLETED and the failed ones by completed_at (conveyor_tasks_ended).
// The entries of the tasks it deleted stay at the head of each range, dead,
// until VACUUM removes them, and while a transaction holds an old snapshot
// VACUUM can remove none: each purge, once a second, then read past every
// task purged since the snapshot began (16,000 buffers a call, two minutes
// into a hold at 800 tasks/s). The purge floors skip them, as the scan
// floors do the ready line's (scanfloor.go).
//
// The rules that keep them safe:
//   - A round that found less than its limit deleted every row it could
//     see up to its cutoffs, so each range's floor rises to its cutoff.
//   - A row with a time below a floor can still appear: a transaction
//     that ended a task at an earlier now and committed after the round's
//     snapshot (a batch of Results applied late, another node's clock).
//     Every commit reports the earliest time it added to each range, this
//     node's own in applyCommitted and the other nodes' by their
//     notifications (timersAddedLocked), and that lowers the floor; one
//     reported while a round runs caps what the round may raise it to.
//   - What a lost report would strand, a walk from the start finds: the
//     floors drop to 0 at a resync and once every purgeFullEvery.

// Purge ranges: the own retentions', then one per retention class.
const (
	rangeOwn = iota
	rangeEnded
	numPurgeRanges = rangeEnded + numClasses
)

// purgeFullEvery is how often a purge walks its ranges from their start.
const purgeFullEvery = time.Minute

// purgeFloors are the purge's floors, under e.mu.
type purgeFloors struct {
	// at holds each range's floor: no row of it lies below (0: none).
	at [numPurgeRanges]int64
	// round is set while a purge runs with the floors; low holds the
	// earliest time reported to each range since it began (0: none).
	round bool
	low   [numPurgeRanges]int64
	// fullAt is when a purge last walked from the start.
	fullAt int64
}

// lowerLocked lowers the floors to the times a commit added: purgeOwnAt
// to the own retentions', ended to the classes' (0: none).
func (f *purgeFloors) lowerLocked(purgeOwnAt int64, ended [numClasses]int64) {
	f.lowerRange(rangeOwn, purgeOwnAt)
	for c, at := range ended {
		f.lowerRange(rangeEnded+c, at)
	}
}

func (f *purgeFloors) lowerRange(r int, at int64) {
	if at == 0 {
		return
	}
	f.at[r] = min(f.at[r], at)
	if f.round {
		earliest(&f.low[r], at)
	}
}

// resetLocked drops the floors to 0: the next purge walks from the start.
func (f *purgeFloors) resetLocked() { f.at = [numPurgeRanges]int64{} }

// startRoundLocked returns the floors a purge at now walks from, and
// whether it owns the round (only the owner may raise them). Every
// purgeFullEvery (or when the clock went back past the last full walk)
// they drop to 0.
func (f *purgeFloors) startRoundLocked(now int64) ([numPurgeRanges]int64, bool) {
	if f.round {
		return [numPurgeRanges]int64{}, false // a purge already runs: walk from the start
	}
	if now-f.fullAt >= int64(purgeFullEvery) || now < f.fullAt {
		f.resetLocked()
		f.fullAt = now
	}
	f.round, f.low = true, [numPurgeRanges]int64{}
	return f.at, true
}

// endRoundLocked ends the round: one that deleted everything it could see
// up to cut (done) raises each range's floor to its cut, or to the
// earliest time reported to the range meanwhile, if lower.
func (f *purgeFloors) endRoundLocked(cut [numPurgeRanges]int64, done bool) {
	f.round = false
	if !done {
		return
	}
	for r, to := range cut {
		if f.low[r] != 0 {
			to = min(to, f.low[r])
		}
		f.at[r] = max(f.at[r], to)
	}
}
