package conveyor

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestReplayCacheExpiry pins that an id is refused while remembered,
// through its expiry, and forgotten after it.
func TestReplayCacheExpiry(t *testing.T) {
	t.Parallel()
	c := newReplayCache(10)
	t0 := time.Unix(1_000_000, 0)
	if err := c.admit("a", t0.Add(time.Minute), t0); err != nil {
		t.Fatal(err)
	}
	if err := c.admit("a", t0.Add(time.Minute), t0.Add(time.Minute)); !errors.Is(err, errReplayed) {
		t.Fatalf("a repeat at its expiry = %v, want errReplayed", err)
	}
	if err := c.admit("b", t0.Add(3*time.Minute), t0.Add(time.Minute+time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := c.size(); n != 1 {
		t.Fatalf("%d ids remembered past the first's expiry, want 1", n)
	}
}

// TestReplayCacheCapacity pins the bound: past it, the ids closest to
// expiry are forgotten, and a request expiring no later than them is
// refused (it could be one of them), while later ones are taken.
func TestReplayCacheCapacity(t *testing.T) {
	t.Parallel()
	const max = 100
	c := newReplayCache(max)
	t0 := time.Unix(1_000_000, 0)
	for i := range 3 * max {
		if err := c.admit(fmt.Sprint("id", i), t0.Add(time.Duration(i)*time.Second), t0); err != nil {
			t.Fatalf("id%d: %v", i, err)
		}
	}
	if n := c.size(); n != max {
		t.Fatalf("%d ids remembered, want the bound %d", n, max)
	}
	// id0 was forgotten: its replay, and any request as old, is refused.
	for _, id := range []string{"id0", "id199", "new"} {
		if err := c.admit(id, t0.Add(199*time.Second), t0); !errors.Is(err, errForgotten) {
			t.Fatalf("%s expiring with a forgotten id = %v, want errForgotten", id, err)
		}
	}
	if err := c.admit("id200", t0.Add(200*time.Second), t0); !errors.Is(err, errReplayed) {
		t.Fatalf("a remembered id = %v, want errReplayed", err)
	}
	if err := c.admit("new", t0.Add(time.Hour), t0); err != nil {
		t.Fatalf("a new id expiring later = %v", err)
	}
}
