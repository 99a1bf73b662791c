package broker

import "math"

// This file is the rules of a queue's dispatch limits other than its rate
// (RateBucket): the concurrency limit of each concurrency key and the cap
// on ACTIVE tasks. Each engine keeps the counts they read (a key's tasks
// admitted and ACTIVE, a queue's ACTIVE tasks) and applies them under its
// lock.

// KeyLimit is how many tasks of one concurrency key a queue admits at
// once: ConcurrencyLimit, or 1 when it is unset (a key means "one at a
// time" unless the queue says otherwise).
func (c QueueConfig) KeyLimit() int {
	return int(max(c.ConcurrencyLimit, 1))
}

// KeyAdmits is the contract's rule for a keyed task that becomes PENDING:
// it enters the queue's ready line (and counts as admitted) while its key
// has fewer than KeyLimit tasks admitted (ready or ACTIVE); otherwise it
// waits in its key's held line, by priority then first in, first out,
// and is admitted as the key's admitted tasks leave.
func (c QueueConfig) KeyAdmits(admitted int) bool {
	return admitted < c.KeyLimit()
}

// KeyStarts is the contract's rule for a keyed task taken from the ready
// line to be leased: it starts while its key has fewer than KeyLimit
// tasks ACTIVE. Only a limit lowered after the task was admitted says no;
// the task then goes back to its key's held line, so the lower limit
// holds from the moment it is set.
func (c QueueConfig) KeyStarts(active int) bool {
	return active < c.KeyLimit()
}

// ActiveRoom is how many more of a queue's tasks may start under its cap
// on ACTIVE tasks (MaxActive) when active of them are ACTIVE (counting
// those being leased): 0 at or past the cap (a cap lowered under what is
// running), math.MaxInt64 when there is no cap.
func (c QueueConfig) ActiveRoom(active int64) int64 {
	if c.MaxActive <= 0 {
		return math.MaxInt64
	}
	return max(int64(c.MaxActive)-active, 0)
}

// BatchSize is how many of a fired group's live members go in its next
// batch: all of them, or MaxActive when the cap is lower. A group larger
// than the cap (it gathered before the cap was lowered, or its size
// policy is above it) could never go whole, so it goes in parts of the
// cap, each once ActiveRoom has room for the whole part.
func (c QueueConfig) BatchSize(live int) int {
	if c.MaxActive > 0 {
		return min(live, int(c.MaxActive))
	}
	return live
}
