package bolt

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestExpiryIndexOrderThroughCompactions drives the index with random
// adds, pops and entries going stale, with compactions under way most of
// the time, against a plain list: every current entry comes out, earliest
// first, and no stale one is kept past a compaction.
func TestExpiryIndexOrderThroughCompactions(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var x timedIndex
	current := map[key]int64{} // what Engine.expires would hold
	isCurrent := func(t timed) bool { at, ok := current[t.k]; return ok && at == t.at }
	var n uint64
	newKey := func() key {
		n++
		var k key
		for i := range 8 {
			k[15-i] = byte(n >> (8 * i))
		}
		return k
	}
	compacted, maxLen, maxCurrent := 0, 0, 0
	for step := range 200_000 {
		switch r := rng.IntN(10); {
		case r < 5: // a task with a time
			k := newKey()
			at := rng.Int64N(1_000_000)
			current[k] = at
			x.add(timed{at: at, k: k})
		case r < 8: // a task leaves memory: its entry goes stale
			for k := range current {
				delete(current, k)
				break
			}
		case r == 9: // the earliest entries come due
			for range 1 + rng.IntN(2) {
				tm, ok := x.peek()
				if !ok {
					break
				}
				if got := x.pop(); got != tm {
					t.Fatalf("step %d: pop %v after peek %v", step, got, tm)
				}
				if step%100 == 0 {
					for k, at := range current {
						if at < tm.at && k != tm.k {
							t.Fatalf("step %d: popped an entry at %d before a current one at %d", step, tm.at, at)
						}
					}
				}
				if isCurrent(tm) {
					delete(current, tm.k)
				}
			}
		}
		if x.old != nil {
			compacted++
		}
		x.tidy(len(current), isCurrent)
		maxLen, maxCurrent = max(maxLen, x.len()), max(maxCurrent, len(current))
	}
	t.Logf("adds %d, most entries %d, most current %d", n, maxLen, maxCurrent)
	if maxLen > 3*maxCurrent+compactSlack {
		t.Fatalf("the index reached %d entries, with at most %d current", maxLen, maxCurrent)
	}
	if compacted == 0 {
		t.Fatal("no compaction ran")
	}
	// Drain: the current entries come out in time order, each once.
	want := make([]timed, 0, len(current))
	for k, at := range current {
		want = append(want, timed{at: at, k: k})
	}
	var got []timed
	for x.len() > 0 {
		if tm := x.pop(); isCurrent(tm) {
			got = append(got, tm)
			delete(current, tm.k)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("drained %d current entries, want %d", len(got), len(want))
	}
	if !slices.IsSortedFunc(got, func(a, b timed) int { return int(a.at - b.at) }) {
		t.Fatal("current entries did not come out earliest first")
	}
}
