package bolt

import (
	"encoding/binary"
	"math/bits"
)

// table maps live task keys to their meta. It is an open-addressing hash
// table with linear probing and backward-shift deletion (no tombstones),
// in one pointer-free array outside the Go heap (see allocOffHeap). A
// slot is 40 bytes (a 16-byte key and a 24-byte meta); the table grows by
// half when it is 70% full (linear probing degrades fast beyond that), so a
// million tasks take 57 to 85 MB.
type table struct {
	slots   []slot
	release func()
	n       int
	touched metaFlags // what touch loaded, kept so that the loads stay
}

type slot struct {
	k key
	m meta // m.flags&flagUsed marks the slot occupied
}

func (s *slot) used() bool { return s.m.flags&flagUsed != 0 }

const (
	tableMinSize = 1024
	tableMaxLoad = 0.7
)

func newTable(hint int) *table {
	t := &table{}
	t.resize(max(tableMinSize, int(float64(hint)/tableMaxLoad)+1))
	return t
}

// home is the slot a key hashes to. Server-made ids within one
// millisecond differ only by small increments of their last bytes, and
// producers may choose ids, so every bit is mixed (the splitmix64
// finalizer) before the slot is picked.
func (t *table) home(k key) int {
	h := binary.BigEndian.Uint64(k[8:]) ^ bits.RotateLeft64(binary.BigEndian.Uint64(k[:8]), 31)
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	hi, _ := bits.Mul64(h, uint64(len(t.slots)))
	return int(hi)
}

// touch loads the home slot of k, so that a put of k soon after finds it
// in the cache: a reopen inserts millions of keys, each a miss otherwise,
// and touching a few ahead lets the CPU wait for several misses at once.
func (t *table) touch(k key) { t.touched += t.slots[t.home(k)].m.flags }

func (t *table) next(i int) int {
	if i++; i == len(t.slots) {
		return 0
	}
	return i
}

func (t *table) get(k key) (meta, bool) {
	for i := t.home(k); t.slots[i].used(); i = t.next(i) {
		if t.slots[i].k == k {
			m := t.slots[i].m
			m.flags &^= flagUsed
			return m, true
		}
	}
	return meta{}, false
}

func (t *table) put(k key, m meta) {
	i := t.home(k)
	for ; t.slots[i].used(); i = t.next(i) {
		if t.slots[i].k == k {
			m.flags |= flagUsed
			t.slots[i].m = m
			return
		}
	}
	m.flags |= flagUsed
	t.slots[i] = slot{k: k, m: m}
	t.n++
	if float64(t.n) > tableMaxLoad*float64(len(t.slots)) {
		t.resize(len(t.slots) + len(t.slots)/2)
	}
}

func (t *table) del(k key) {
	i := t.home(k)
	for ; t.slots[i].used(); i = t.next(i) {
		if t.slots[i].k == k {
			break
		}
	}
	if !t.slots[i].used() {
		return
	}
	// Shift later members of the probe run back into the hole, so lookups
	// never need tombstones.
	hole := i
	for j := t.next(i); t.slots[j].used(); j = t.next(j) {
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

func (t *table) resize(size int) {
	old, oldRelease := t.slots, t.release
	t.slots, t.release = allocOffHeap[slot](size)
	t.n = 0
	for i := range old {
		if old[i].used() {
			t.put(old[i].k, old[i].m)
		}
	}
	if oldRelease != nil {
		oldRelease()
	}
}

// free releases the table's memory; the table must not be used after.
func (t *table) free() {
	if t.release != nil {
		t.release()
	}
	t.slots, t.release, t.n = nil, nil, 0
}

// getOrZero is get for a key the caller knows is present.
func (t *table) getOrZero(k key) meta {
	m, _ := t.get(k)
	return m
}
