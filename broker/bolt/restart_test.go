package bolt_test

import (
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

func TestRestartFIFOByID(t *testing.T) {
	path := t.TempDir() + "/conveyor.db"
	e := openEngine(t, bolt.Config{Path: path})
	var want []string
	for i := range 5 {
		want = append(want, bt.EnqueueOne(t, e, bt.T0.Add(time.Duration(i)*time.Millisecond), bt.NewTask("q")).ID)
	}
	// Released tasks go to the back of the line while the engine runs...
	l := bt.LeaseOne(t, e, "s1", "q", bt.T0)
	if err := e.Release(t.Context(), broker.ReleaseParams{SessionID: "s1", Leases: []broker.LeaseRef{bt.Ref(l)}, Now: bt.T0}); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	// ...but after a restart the order is by id, which is enqueue order.
	e = openEngine(t, bolt.Config{Path: path})
	ls := bt.Lease(t, e, "s1", "q", 10, bt.T0, bt.TTL)
	var got []string
	for _, l := range ls {
		got = append(got, l.Task.ID)
	}
	if len(got) != len(want) {
		t.Fatalf("leased %d, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("lease order after restart %v, want %v", got, want)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := bolt.Open(bolt.Config{}); err == nil {
		t.Fatalf("Open with no path succeeded")
	}
	// A directory where the file should be.
	dir := t.TempDir()
	if _, err := bolt.Open(bolt.Config{Path: dir}); err == nil {
		t.Fatalf("Open of a directory succeeded")
	}
}
