package bolt

import (
	"math/rand/v2"
	"testing"
)

// TestFIFOAgainstSlice drives a fifo and a slice with the same pushes and
// pops, in bursts that take the fifo from empty to tens of thousands of
// keys (across block sizes) and back, and checks that they agree and
// that a drained fifo keeps at most one block, of the smallest size.
func TestFIFOAgainstSlice(t *testing.T) {
	t.Parallel()
	var f fifo
	defer f.free()
	var ref []key
	rng := rand.New(rand.NewPCG(7, 8))
	var next uint64
	for burst := range 300 {
		pushes := rng.IntN(1 << (burst % 17)) // up to 65,535 at once
		for range pushes {
			var k key
			next++
			k[0], k[8], k[15] = byte(next>>16), byte(next>>8), byte(next)
			f.push(k)
			ref = append(ref, k)
		}
		pops := rng.IntN(len(ref) + 2)
		for range pops {
			got, ok := f.pop()
			if len(ref) == 0 {
				if ok {
					t.Fatalf("burst %d: pop of an empty fifo returned %x", burst, got)
				}
				continue
			}
			if !ok || got != ref[0] {
				t.Fatalf("burst %d: pop = %x, %v; want %x", burst, got, ok, ref[0])
			}
			ref = ref[1:]
		}
		if f.len() != len(ref) {
			t.Fatalf("burst %d: len %d, want %d", burst, f.len(), len(ref))
		}
		if f.len() == 0 && (len(f.blocks) > 1 || len(f.blocks) == 1 && len(f.blocks[0].keys) != fifoMinBlock) {
			t.Fatalf("burst %d: a drained fifo keeps %d blocks", burst, len(f.blocks))
		}
		held := 0
		for _, b := range f.blocks {
			held += len(b.keys)
		}
		if f.len() > fifoMaxBlock && held > 2*f.len()+fifoMaxBlock {
			t.Fatalf("burst %d: %d keys in blocks of %d", burst, f.len(), held)
		}
	}
}

// BenchmarkFIFO measures a ready FIFO's push and pop: "drained" is the
// pattern of a queue dispatched as fast as it is fed (each push finds it
// empty, each pop empties it), "deep" one of a million keys pushed, then
// popped.
func BenchmarkFIFO(b *testing.B) {
	var k key
	b.Run("drained", func(b *testing.B) {
		var f fifo
		defer f.free()
		for b.Loop() {
			f.push(k)
			f.pop()
		}
	})
	b.Run("deep", func(b *testing.B) {
		var f fifo
		defer f.free()
		for b.Loop() {
			for range 1_000_000 {
				f.push(k)
			}
			for range 1_000_000 {
				f.pop()
			}
		}
	})
}
