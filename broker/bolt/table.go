package bolt

import (
	"encoding/binary"
	"math/bits"
)

// table maps live task keys to their meta. It is an open-addressing hash
// table with linear probing and backward-shift deletion (no tombstones),
// in one pointer-free array outside the Go heap (see allocOffHeap). A
// slot is 48 bytes (a 16-byte key and a 32-byte meta); the table grows by
// half when it is 70% full (linear probing degrades fast beyond that), so a
// million tasks take 57 to 85 MB.
//
// Growing moves every key into the larger array, most of a second at ten
// million tasks, and the engine's lock is held for every operation on the
// table. So an owner that can take the growth off its hot path says so
// (wantGrow): past 70% the table only asks it to grow; the owner allocates
// the new array outside its lock and hands it over (startGrow), then moves
// the keys a few thousand at a time (migrate), releasing its lock between
// steps. While keys move, each is in the new array or, not moved yet, in
// the old one, and lookups try both. The old array is never written but to
// mark a slot gone when its key leaves early (a delete, or a put that
// moves it), so its probe runs stay intact and no key can shift behind
// the move. Past 85% the table grows at once whatever the owner does.
type table struct {
	slots   []slot
	release func()
	n       int       // keys held, in slots and old together
	touched metaFlags // what touch loaded, kept so that the loads stay
	// soft and hard are the key counts past which the table asks to grow
	// and grows at once.
	soft, hard int

	// old is the array being moved out of (nil: no growth under way).
	// Its keys from index moved on, unless gone, are held there.
	old        []slot
	oldRelease func()
	moved      int
	// wantGrow, when set, is called when the table passes its soft limit,
	// once per growth, instead of growing at once.
	wantGrow   func()
	growWanted bool
}

type slot struct {
	k key
	m meta // m.flags&flagUsed marks the slot occupied
}

func (s *slot) used() bool { return s.m.flags&flagUsed != 0 }

const (
	tableMinSize  = 1024
	tableMaxLoad  = 0.7
	tableHardLoad = 0.85
	// migrateStep is how many old slots a step of a growth moves: about a
	// tenth of a millisecond with the lock held, at any size (BenchmarkTableGrow).
	migrateStep = 4096
)

func newTable(hint int) *table {
	t := &table{}
	t.slots, t.release = allocOffHeap[slot](max(tableMinSize, int(float64(hint)/tableMaxLoad)+1))
	t.setLimits()
	return t
}

func (t *table) setLimits() {
	t.soft = int(tableMaxLoad * float64(len(t.slots)))
	t.hard = int(tableHardLoad * float64(len(t.slots)))
}

// homeIn is the slot a key hashes to in an array of n slots. Server-made
// ids within one millisecond differ only by small increments of their
// last bytes, and producers may choose ids, so every bit is mixed (the
// splitmix64 finalizer) before the slot is picked.
func homeIn(k key, n int) int {
	h := binary.BigEndian.Uint64(k[8:]) ^ bits.RotateLeft64(binary.BigEndian.Uint64(k[:8]), 31)
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	hi, _ := bits.Mul64(h, uint64(n))
	return int(hi)
}

func (t *table) home(k key) int { return homeIn(k, len(t.slots)) }

// touch loads the home slot of k, so that a put of k soon after finds it
// in the cache: a reopen inserts millions of keys, each a miss otherwise,
// and touching a few ahead lets the CPU wait for several misses at once.
func (t *table) touch(k key) { t.touched += t.slots[t.home(k)].m.flags }

func next(slots []slot, i int) int {
	if i++; i == len(slots) {
		return 0
	}
	return i
}

// lookup returns the index of k in slots and true, or the free slot that
// ends k's probe run and false.
func (t *table) lookup(k key) (int, bool) {
	i := t.home(k)
	for ; t.slots[i].used(); i = next(t.slots, i) {
		if t.slots[i].k == k {
			return i, true
		}
	}
	return i, false
}

// inOld returns the index in old of a key held there, or -1.
func (t *table) inOld(k key) int {
	if t.old == nil {
		return -1
	}
	for i := homeIn(k, len(t.old)); t.old[i].used(); i = next(t.old, i) {
		if t.old[i].k == k {
			if i < t.moved || t.old[i].m.flags&flagGone != 0 {
				return -1 // moved, or left early
			}
			return i
		}
	}
	return -1
}

func (t *table) get(k key) (meta, bool) {
	var m meta
	if i, ok := t.lookup(k); ok {
		m = t.slots[i].m
	} else if i := t.inOld(k); i >= 0 {
		m = t.old[i].m
	} else {
		return meta{}, false
	}
	m.flags &^= flagUsed
	return m, true
}

func (t *table) put(k key, m meta) {
	m.flags |= flagUsed
	i, ok := t.lookup(k)
	if ok {
		t.slots[i].m = m
		return
	}
	if j := t.inOld(k); j >= 0 {
		t.old[j].m.flags |= flagGone // it moves now
	} else {
		t.n++
	}
	t.slots[i] = slot{k: k, m: m}
	t.checkLoad()
}

// checkLoad grows the table, or asks its owner to, once it is full enough.
func (t *table) checkLoad() {
	switch {
	case t.n <= t.soft:
	case t.wantGrow == nil || t.n > t.hard:
		t.growNow()
	case !t.growWanted && t.old == nil:
		t.growWanted = true
		t.wantGrow()
	}
}

func (t *table) del(k key) {
	i, ok := t.lookup(k)
	if !ok {
		if j := t.inOld(k); j >= 0 {
			t.old[j].m.flags |= flagGone
			t.n--
		}
		return
	}
	// Shift later members of the probe run back into the hole, so lookups
	// never need tombstones.
	hole := i
	for j := next(t.slots, i); t.slots[j].used(); j = next(t.slots, j) {
		h := t.home(t.slots[j].k)
		// Move j into the hole unless its home lies cyclically in (hole, j].
		if (j > hole && (h <= hole || h > j)) || (j < hole && h <= hole && h > j) {
			t.slots[hole] = t.slots[j]
			hole = j
		}
	}
	t.slots[hole] = slot{}
	t.n--
}

func (t *table) len() int { return t.n }

// growSize is the size of the array a growth wanted now would move into,
// or 0 when none is wanted (none asked for, or one under way).
func (t *table) growSize() int {
	if !t.growWanted || t.old != nil {
		return 0
	}
	return len(t.slots) + len(t.slots)/2
}

// startGrow begins moving the keys into slots, a zeroed array of
// growSize slots, and reports whether it did; when it did not (the growth
// is no longer wanted, or slots is not of the size wanted) the caller
// still owns slots.
func (t *table) startGrow(slots []slot, release func()) bool {
	if size := t.growSize(); size == 0 || len(slots) != size {
		return false
	}
	t.old, t.oldRelease = t.slots, t.release
	t.slots, t.release = slots, release
	t.moved = 0
	t.growWanted = false
	t.setLimits()
	return true
}

// migrate moves the keys of up to max old slots and reports whether the
// growth is over (true too when none is under way).
func (t *table) migrate(max int) bool {
	if t.old == nil {
		return true
	}
	if !t.move(max) {
		return false
	}
	t.checkLoad() // the keys put while they moved may call for the next growth
	return true
}

// move moves the keys of up to max old slots and reports whether all are
// moved (the old array released).
func (t *table) move(max int) bool {
	end := min(t.moved+max, len(t.old))
	for i := t.moved; i < end; i++ {
		if s := &t.old[i]; s.used() && s.m.flags&flagGone == 0 {
			j, _ := t.lookup(s.k) // not in slots: a put would have marked it gone
			t.slots[j] = *s
		}
	}
	t.moved = end
	if end < len(t.old) {
		return false
	}
	if t.oldRelease != nil {
		t.oldRelease()
	}
	t.old, t.oldRelease, t.moved = nil, nil, 0
	return true
}

// growNow grows the table at once, finishing a growth under way first.
func (t *table) growNow() {
	t.move(len(t.old))
	t.growWanted = true
	slots, release := allocOffHeap[slot](t.growSize())
	t.startGrow(slots, release)
	t.move(len(t.old))
}

// free releases the table's memory; the table must not be used after.
func (t *table) free() {
	if t.oldRelease != nil {
		t.oldRelease()
	}
	if t.release != nil {
		t.release()
	}
	*t = table{}
}

// getOrZero is get for a key the caller knows is present.
func (t *table) getOrZero(k key) meta {
	m, _ := t.get(k)
	return m
}
