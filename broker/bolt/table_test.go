package bolt

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// TestTableAgainstMap drives the table and a Go map with the same random
// puts, deletes and lookups (of present and of deleted keys) and checks
// they agree, through several growths: made at once, and made in steps
// by an owner, as the engine does, with the operations between the steps.
func TestTableAgainstMap(t *testing.T) {
	t.Parallel()
	t.Run("at once", func(t *testing.T) { checkTableAgainstMap(t, false) })
	t.Run("in steps", func(t *testing.T) { checkTableAgainstMap(t, true) })
}

func checkTableAgainstMap(t *testing.T, steps bool) {
	tab := newTable(0)
	defer tab.free()
	rng := rand.New(rand.NewPCG(1, 2))
	var growths int
	if steps {
		tab.wantGrow = func() {
			slots, release := allocOffHeap[slot](tab.growSize())
			if !tab.startGrow(slots, release) {
				t.Fatal("startGrow refused the size growSize gave")
			}
			growths++
		}
	}
	ref := map[key]meta{}
	keys := make([]key, 0, 20000)
	var gone []key // deleted keys, looked up again later
	for i := range 200000 {
		if steps && rng.IntN(4) == 0 {
			tab.migrate(1 + rng.IntN(64))
		}
		switch op := rng.IntN(20); {
		case op < 12 || len(keys) == 0:
			var k key
			// Mostly random keys, some sequential ones sharing prefixes,
			// some deleted ones put back.
			switch {
			case op == 0 && len(gone) > 0:
				k = gone[len(gone)-1]
				gone = gone[:len(gone)-1]
			case i%3 == 0:
				k[15] = byte(i)
				k[14] = byte(i >> 8)
				k[13] = byte(i >> 16)
			default:
				for j := range k {
					k[j] = byte(rng.Uint32())
				}
			}
			m := meta{due: int64(i), retried: int32(i % 7)}
			if _, ok := ref[k]; !ok {
				keys = append(keys, k)
			}
			tab.put(k, m)
			ref[k] = m
		case op < 18:
			j := rng.IntN(len(keys))
			k := keys[j]
			keys[j] = keys[len(keys)-1]
			keys = keys[:len(keys)-1]
			tab.del(k)
			delete(ref, k)
			gone = append(gone, k)
		case op == 18 && len(gone) > 0:
			k := gone[rng.IntN(len(gone))]
			if m, ok := tab.get(k); ok {
				t.Fatalf("op %d: get(%x) of a deleted key = %v", i, k, m)
			}
		default:
			k := keys[rng.IntN(len(keys))]
			got, ok := tab.get(k)
			if !ok || got != ref[k] {
				t.Fatalf("op %d: get(%x) = %v, %v; want %v", i, k, got, ok, ref[k])
			}
		}
		if tab.len() != len(ref) {
			t.Fatalf("op %d: len %d, want %d", i, tab.len(), len(ref))
		}
	}
	if steps && growths < 3 {
		t.Fatalf("%d growths in steps, want several", growths)
	}
	for k, m := range ref {
		if got, ok := tab.get(k); !ok || got != m {
			t.Fatalf("get(%x) = %v, %v; want %v", k, got, ok, m)
		}
	}
	for !tab.migrate(migrateStep) {
	}
	if tab.old != nil {
		t.Fatal("the old array is kept after the last step")
	}
	for k, m := range ref {
		if got, ok := tab.get(k); !ok || got != m {
			t.Fatalf("after the move: get(%x) = %v, %v; want %v", k, got, ok, m)
		}
	}
	var absent key
	absent[0] = 0xff
	if _, ok := tab.get(absent); ok {
		t.Fatal("found a key never put")
	}
}

// TestTableGrowsAtOnceWhenTooFull checks that a table whose owner does
// not grow it when asked still grows at its hard limit, so that probe runs
// stay short and the array never fills.
func TestTableGrowsAtOnceWhenTooFull(t *testing.T) {
	t.Parallel()
	tab := newTable(0)
	defer tab.free()
	var asked []int // the table's size at each ask
	tab.wantGrow = func() { asked = append(asked, len(tab.slots)) }
	size := len(tab.slots)
	rng := rand.New(rand.NewPCG(3, 4))
	for range 4 * size {
		var k key
		binary.BigEndian.PutUint64(k[:8], rng.Uint64())
		binary.BigEndian.PutUint64(k[8:], rng.Uint64())
		tab.put(k, meta{})
		if tab.len() > int(tableHardLoad*float64(len(tab.slots)))+1 {
			t.Fatalf("%d keys in %d slots: past the hard limit", tab.len(), len(tab.slots))
		}
	}
	if len(tab.slots) <= 2*size || len(asked) < 3 {
		t.Fatalf("%d slots from %d after %d asks; want several growths", len(tab.slots), size, len(asked))
	}
	for i := 1; i < len(asked); i++ {
		if asked[i] <= asked[i-1] {
			t.Fatalf("asked to grow at sizes %v: more than once per size", asked)
		}
	}
}

// BenchmarkTableGrow measures a growth of a table holding
// CONVEYOR_BENCH_TASKS keys (default 1,000,000) into an array half as
// large again: "at-once" is the whole move (what a table without an owner
// does, and any table past its hard limit), "step" one step of the move
// as the engine makes it, which is the longest the engine's lock is held.
// The new array's allocation is left out: the engine makes it outside
// its lock.
func BenchmarkTableGrow(b *testing.B) {
	n := benchTasks(b, 1_000_000)
	rng := rand.New(rand.NewPCG(5, 6))
	keys := make([]key, n)
	for i := range keys {
		binary.BigEndian.PutUint64(keys[i][:8], rng.Uint64())
		binary.BigEndian.PutUint64(keys[i][8:], rng.Uint64())
	}
	filled := func() *table {
		tab := newTable(n) // sized so that the keys fit without growing
		for _, k := range keys {
			tab.put(k, meta{prio: 1})
		}
		tab.growWanted = true
		slots, release := allocOffHeap[slot](tab.growSize())
		tab.startGrow(slots, release)
		return tab
	}
	b.Run("at-once", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			tab := filled()
			b.StartTimer()
			tab.move(len(tab.old))
			b.StopTimer()
			if tab.len() != n || tab.old != nil {
				b.Fatalf("%d keys after the growth, want %d", tab.len(), n)
			}
			tab.free()
			b.StartTimer()
		}
	})
	b.Run("step", func(b *testing.B) {
		tab := filled()
		defer func() { tab.free() }()
		for b.Loop() {
			if tab.migrate(migrateStep) {
				b.StopTimer()
				tab.free()
				tab = filled()
				b.StartTimer()
			}
		}
	})
}

// benchTasks is how many tasks a benchmark uses: CONVEYOR_BENCH_TASKS, or
// def when it is unset.
func benchTasks(b *testing.B, def int) int {
	s := os.Getenv("CONVEYOR_BENCH_TASKS")
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		b.Fatalf("CONVEYOR_BENCH_TASKS: %v", err)
	}
	return n
}
