package bolt

import "testing"

// BenchmarkReadyLine measures the ready line of a queue as dispatch uses
// it, under the engine's lock: enterReadyLocked, then popReadyLocked.
// "drained" is a queue dispatched as fast as it is fed (each push finds it
// empty, each pop empties it), "deep" 100,000 tasks made ready, then
// popped, across three priorities. "churn" is a queue never popped, with
// a task ready throughout, whose other tasks each leave while they wait
// (unreadyLocked, as a cancel does): a push and a departure, and the
// compaction that keeps the FIFOs bounded.
func BenchmarkReadyLine(b *testing.B) {
	e := openTestEngine(b, Config{})
	e.mu.Lock()
	defer e.mu.Unlock()
	q := e.queueLocked("q")
	keys := make([]key, 100_000)
	for i := range keys {
		keys[i] = e.newIDLocked(e.cfg.Now())
	}
	pending := func(i int) meta {
		return meta{state: statePending, queue: q.index, prio: uint8(3 + i%3), flags: flagCommitted}
	}
	b.Run("drained", func(b *testing.B) {
		m := pending(0)
		for b.Loop() {
			e.enterReadyLocked(keys[0], m)
			if _, _, ok := e.popReadyLocked(q); !ok {
				b.Fatal("nothing ready")
			}
		}
	})
	b.Run("deep", func(b *testing.B) {
		for b.Loop() {
			for i, k := range keys {
				e.enterReadyLocked(k, pending(i))
			}
			for range keys {
				if _, _, ok := e.popReadyLocked(q); !ok {
					b.Fatal("nothing ready")
				}
			}
		}
	})
	b.Run("churn", func(b *testing.B) {
		e.enterReadyLocked(keys[0], pending(0))
		for b.Loop() {
			k := e.newIDLocked(e.cfg.Now())
			e.enterReadyLocked(k, pending(1))
			m, _ := e.tasks.get(k)
			e.unreadyLocked(k, &m)
			e.tasks.del(k)
		}
		b.StopTimer()
		if _, _, ok := e.popReadyLocked(q); !ok {
			b.Fatal("the task ready throughout is not")
		}
	})
}
