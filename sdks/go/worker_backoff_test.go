package conveyor

import (
	"testing"
	"time"
)

func TestWorkerBackoffFullJitter(t *testing.T) {
	b := backoff{base: DefaultReconnectBase, max: DefaultReconnectMax}
	ceilings := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second,
		8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for n, want := range ceilings {
		if got := b.ceiling(n); got != want {
			t.Errorf("ceiling(%d) = %s, want %s", n, got, want)
		}
	}
	if got := b.ceiling(1000); got != DefaultReconnectMax {
		t.Errorf("ceiling(1000) = %s, want the max", got)
	}
	for n := range 10 {
		var lowHalf, highHalf int
		for range 2000 {
			d := b.delay(n)
			if d < 0 || d >= b.ceiling(n) {
				t.Fatalf("delay(%d) = %s, outside [0, %s)", n, d, b.ceiling(n))
			}
			if d < b.ceiling(n)/2 {
				lowHalf++
			} else {
				highHalf++
			}
		}
		// Full jitter spreads over the whole window, not just its top.
		if lowHalf < 800 || highHalf < 800 {
			t.Errorf("delay(%d): %d in the lower half and %d in the upper, want both near 1000", n, lowHalf, highHalf)
		}
	}
	if d := (backoff{}).delay(3); d != 0 {
		t.Errorf("zero backoff delay = %s, want 0", d)
	}
}
