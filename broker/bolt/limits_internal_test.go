package bolt

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// openTestEngine opens an engine on a new file in t's temp dir and, at
// cleanup, checks the file's consistency and closes it.
func openTestEngine(t testing.TB, cfg Config) *Engine {
	t.Helper()
	cfg.Path = filepath.Join(t.TempDir(), "conveyor.db")
	e, err := Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := e.Check(); err != nil {
			t.Errorf("consistency check: %v", err)
		}
		if err := e.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return e
}

// concurrencyKeys reports how many concurrency keys e holds, and the
// references of the one named name in queue (-1: none).
func concurrencyKeys(e *Engine, queue, name string) (n, refs int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	refs = -1
	if q := e.byName[queue]; q != nil {
		if c := e.ckeys[ckeyID{queue: q.index, name: name}]; c != nil {
			refs = c.refs
		}
	}
	return len(e.ckeys), refs
}

// TestConcurrencyKeyFreedWithItsLastTask checks that a key lives while any
// live task names it, whatever that task's state, and is forgotten with
// the last one, so that keys do not pile up.
func TestConcurrencyKeyFreedWithItsLastTask(t *testing.T) {
	t.Parallel()
	e := openTestEngine(t, Config{})
	keyed := func() broker.NewTask { nt := bt.NewTask("q"); nt.ConcurrencyKey = "k"; return nt }
	later := keyed()
	later.ProcessAt = bt.T0.Add(time.Hour)
	ts := bt.Enqueue(t, e, bt.T0, keyed(), keyed(), later) // ready, held, SCHEDULED
	a := bt.LeaseOne(t, e, "s", "q", bt.T0)
	bt.Fail(t, e, "s", a, "x", bt.T0, bt.T0.Add(time.Hour)) // RETRY
	if n, refs := concurrencyKeys(e, "q", "k"); n != 1 || refs != 3 {
		t.Fatalf("with 3 live tasks of the key: %d keys, %d references; want 1 key of 3", n, refs)
	}
	bt.Succeed(t, e, "s", bt.LeaseOne(t, e, "s", "q", bt.T0), bt.T0)
	if n, refs := concurrencyKeys(e, "q", "k"); n != 1 || refs != 2 {
		t.Fatalf("with a RETRY and a SCHEDULED task of the key left: %d keys, %d references; want 1 key of 2", n, refs)
	}
	for _, id := range []string{ts[0].ID, ts[2].ID} {
		res, err := e.Act(t.Context(), broker.ActParams{Action: broker.ActionDelete, IDs: []string{id}, Now: bt.T0})
		if err != nil || res[0].Err != nil {
			t.Fatalf("delete %s: %v %v", id, err, res)
		}
	}
	if n, refs := concurrencyKeys(e, "q", "k"); n != 0 || refs != -1 {
		t.Fatalf("with no live task of the key: %d keys (the key's references %d); want none", n, refs)
	}
}
