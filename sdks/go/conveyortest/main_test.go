package conveyortest_test

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run when a goroutine outlives the tests: a server or
// a worker a helper did not stop.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// recorder is a testing.TB that records failures instead of failing the
// test, so that a test can check that a helper fails, and how. Fatal
// stops the goroutine as the real one does. Everything else (Cleanup,
// TempDir, Context) is the real test's.
type recorder struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) { r.record(fmt.Sprintf(format, args...)) }
func (r *recorder) Error(args ...any)                 { r.record(fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); runtime.Goexit() }
func (r *recorder) Fatal(args ...any)                 { r.Error(args...); runtime.Goexit() }
func (r *recorder) FailNow()                          { r.record("FailNow"); runtime.Goexit() }

func (r *recorder) record(msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, msg)
}

// failure runs fn with a recorder on a goroutine of its own, as a test
// runs, and returns what it reported; it fails t if fn reported nothing.
func failure(t *testing.T, fn func(tb testing.TB)) string {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.msgs) == 0 {
		t.Fatalf("the helper did not fail the test")
	}
	return strings.Join(r.msgs, "\n")
}

// contains fails t unless s holds each of subs.
func contains(t *testing.T, what, s string, subs ...string) {
	t.Helper()
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			t.Errorf("%s does not mention %q:\n%s", what, sub, s)
		}
	}
}
