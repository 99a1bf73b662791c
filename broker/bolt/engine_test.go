package bolt_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	berrors "go.etcd.io/bbolt/errors"
	"go.uber.org/goleak"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// TestMain fails the run when a goroutine outlives the tests: an engine
// left open, or a committer that did not stop on Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openEngine opens an engine on cfg.Path, or on a new file in t's temp dir
// when cfg.Path is empty. At cleanup it checks the file's consistency and
// closes the engine; if the test closed the engine itself, the file is
// reopened for the check (cleanups run last-registered first, so a test
// that reopens a path checks the newest engine first).
func openEngine(t testing.TB, cfg bolt.Config) *bolt.Engine {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), "conveyor.db")
	}
	e, err := bolt.Open(cfg)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { checkAndClose(t, e, cfg.Path) })
	return e
}

// checkAndClose runs bbolt's consistency check on e's file and closes e.
func checkAndClose(t testing.TB, e *bolt.Engine, path string) {
	t.Helper()
	err := e.Check()
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		// The test closed the engine: check the file as it was left.
		if e, err = bolt.Open(bolt.Config{Path: path}); err != nil {
			t.Errorf("reopen for the consistency check: %v", err)
			return
		}
		err = e.Check()
	}
	if err != nil {
		t.Errorf("consistency check of %s: %v", path, err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestConformance(t *testing.T) {
	bt.Run(t, func(t testing.TB, store string, n broker.Notifier) broker.Broker {
		return openEngine(t, bolt.Config{Path: filepath.Join(store, "conveyor.db"), Notifier: n})
	})
}

// Outcomes the engine's own tests use, as the server would decide them.
const (
	outcomeSuccess = broker.OutcomeSuccess
	outcomeRetry   = broker.OutcomeRetry
)

// decide is the decision the server makes for outcome (with a fixed
// one-second backoff).
func decide(session string, l broker.Lease, outcome broker.Outcome, now time.Time) broker.Decision {
	if outcome == outcomeSuccess {
		return broker.Completed(session, bt.Ref(l), now, nil)
	}
	return broker.Retrying(session, bt.Ref(l), now, now.Add(time.Second), "boom").WithVerdict()
}
