package bolt_test

import (
	"errors"
	"os"
	"path/filepath"
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

// TestOpenFollowsAFileReplacedBeforeTheLock: a file renamed over the path
// after Open opened the old one but before it held its lock (what conveyor
// compact does while a server starts) must not leave the engine on the
// replaced file, where its writes would be lost: it opens the new one.
func TestOpenFollowsAFileReplacedBeforeTheLock(t *testing.T) {
	dir := t.TempDir()
	path, other := filepath.Join(dir, "conveyor.db"), filepath.Join(dir, "new.db")
	withTask := func(path string) string {
		e, err := bolt.Open(bolt.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		id := bt.EnqueueOne(t, e, bt.T0, bt.NewTask("q")).ID
		if err := e.Close(); err != nil {
			t.Fatal(err)
		}
		return id
	}
	oldID, newID := withTask(path), withTask(other)
	replaced := 0
	cfg := bolt.Config{Path: path}
	bolt.SetAfterOpenFile(&cfg, func() {
		if replaced++; replaced == 1 {
			if err := os.Rename(other, path); err != nil {
				t.Error(err)
			}
		}
	})
	e := openEngine(t, cfg)
	if replaced != 2 {
		t.Fatalf("the file was opened %d times, want 2 (the replaced one, then the new one)", replaced)
	}
	bt.RequireState(t, e, newID, broker.StatePending)
	if _, err := e.GetTask(t.Context(), oldID); !errors.Is(err, broker.ErrNotFound) {
		t.Fatalf("GetTask of the replaced file's task: %v, want not found", err)
	}
}
