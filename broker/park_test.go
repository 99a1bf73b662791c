package broker

import (
	"testing"
	"time"
)

// TestParkedLeaseHandsEachSlotOverOnce: claims take only open slots; the
// slots they hold are kept from the session's own leases until it
// collects what they granted, with the mark of the offer they claimed
// from; Close waits for the claims in flight and returns what they
// granted, and no claim is made after it.
func TestParkedLeaseHandsEachSlotOverOnce(t *testing.T) {
	granted := 0
	pl := NewParkedLease(LeaseParams{SessionID: "s"}, func() { granted++ })
	if c, closed := pl.Claim(1); c.N != 0 || closed {
		t.Fatalf("a claim before any offer took %d slots (closed %v)", c.N, closed)
	}
	if kept, claimed := pl.Offer(5, 2, 1); kept != 2 || claimed != 0 {
		t.Fatalf("Offer(5, keep 2) kept %d, claims hold %d; want 2, 0", kept, claimed)
	}
	c1, _ := pl.Claim(4)
	if c1.N != 3 {
		t.Fatalf("a claim of 4 took %d of the 3 open slots", c1.N)
	}
	if c, _ := pl.Claim(1); c.N != 0 {
		t.Fatalf("a claim took %d slots with none open", c.N)
	}
	// The session takes its slots back: the claim's are not among them.
	if kept, claimed := pl.Offer(5, 5, 2); kept != 2 || claimed != 3 {
		t.Fatalf("Offer(5, keep 5) kept %d, claims hold %d; want 2, 3", kept, claimed)
	}
	pl.Settle(c1, []Lease{{Token: 1}, {Token: 2}})
	if granted != 1 {
		t.Fatalf("granted called %d times after one settle", granted)
	}
	leases, mark := pl.Collect()
	if len(leases) != 2 || mark != 1 {
		t.Fatalf("Collect: %d leases, mark %d; want 2, the claimed offer's 1", len(leases), mark)
	}
	if kept, claimed := pl.Offer(3, 0, 3); kept != 0 || claimed != 0 {
		t.Fatalf("after Collect, Offer kept %d, claims hold %d; want 0, 0", kept, claimed)
	}

	c2, _ := pl.Claim(2)
	closed := make(chan []Lease, 1)
	go func() { closed <- pl.Close() }()
	select {
	case <-closed:
		t.Fatal("Close returned with a claim in flight")
	case <-time.After(20 * time.Millisecond):
	}
	pl.Settle(c2, []Lease{{Token: 3}})
	if left := <-closed; len(left) != 1 || left[0].Token != 3 {
		t.Fatalf("Close returned %v, want the claim's lease", left)
	}
	if c, isClosed := pl.Claim(1); c.N != 0 || !isClosed {
		t.Fatalf("a claim after Close took %d slots (closed %v)", c.N, isClosed)
	}
	if kept, _ := pl.Offer(3, 0, 4); kept != 0 {
		t.Fatalf("Offer after Close kept %d", kept)
	}
}
