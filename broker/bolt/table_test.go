package bolt

import (
	"encoding/binary"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// TestTableAgainstMap drives the table and a Go map with the same random
// puts and deletes and checks they agree, through several resizes.
func TestTableAgainstMap(t *testing.T) {
	t.Parallel()
	tab := newTable(0)
	defer tab.free()
	ref := map[key]meta{}
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]key, 0, 20000)
	for i := range 200000 {
		switch op := rng.IntN(10); {
		case op < 6 || len(keys) == 0:
			var k key
			// Mostly random keys, some sequential ones sharing prefixes.
			if i%3 == 0 {
				k[15] = byte(i)
				k[14] = byte(i >> 8)
				k[13] = byte(i >> 16)
			} else {
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
		case op < 9:
			j := rng.IntN(len(keys))
			k := keys[j]
			keys[j] = keys[len(keys)-1]
			keys = keys[:len(keys)-1]
			tab.del(k)
			delete(ref, k)
		default:
			k := keys[rng.IntN(len(keys))]
			got, ok := tab.get(k)
			if !ok || got != ref[k] {
				t.Fatalf("op %d: get(%x) = %v, %v; want %v", i, k, got, ok, ref[k])
			}
		}
	}
	if tab.len() != len(ref) {
		t.Fatalf("len %d, want %d", tab.len(), len(ref))
	}
	for k, m := range ref {
		if got, ok := tab.get(k); !ok || got != m {
			t.Fatalf("get(%x) = %v, %v; want %v", k, got, ok, m)
		}
	}
	var absent key
	absent[0] = 0xff
	if _, ok := tab.get(absent); ok {
		t.Fatal("found a key never put")
	}
}

// BenchmarkTableGrow measures the one-step growth of a table holding
// CONVEYOR_BENCH_TASKS keys (default 1,000,000), the pause every engine
// operation waits out when the live task count crosses 70% of the table.
func BenchmarkTableGrow(b *testing.B) {
	n := benchTasks(b, 1_000_000)
	rng := rand.New(rand.NewPCG(5, 6))
	keys := make([]key, n)
	for i := range keys {
		binary.BigEndian.PutUint64(keys[i][:8], rng.Uint64())
		binary.BigEndian.PutUint64(keys[i][8:], rng.Uint64())
	}
	for b.Loop() {
		b.StopTimer()
		tab := newTable(n) // sized so that the keys fit without growing
		for _, k := range keys {
			tab.put(k, meta{prio: 1})
		}
		b.StartTimer()
		tab.resize(len(tab.slots) + len(tab.slots)/2)
		b.StopTimer()
		if tab.len() != n {
			b.Fatalf("%d keys after the growth, want %d", tab.len(), n)
		}
		tab.free()
		b.StartTimer()
	}
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
