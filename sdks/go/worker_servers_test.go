package conveyor_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/internal/testwait"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// runOn starts w with a handler of type "t" that sends each task's id to
// the returned channel.
func runOn(t *testing.T, w *conveyor.Worker) <-chan string {
	t.Helper()
	ran := make(chan string, 16)
	w.HandleFunc("t", func(_ context.Context, d *conveyor.Delivery) error {
		ran <- d.ID
		return nil
	})
	wtRun(t, w)
	return ran
}

// enqueueOn enqueues a task of type "t" on s alone.
func enqueueOn(t *testing.T, s *servertest.Server) string {
	t.Helper()
	info, err := newClient(t, s.URL()).Enqueue(context.Background(), "t", nil)
	if err != nil {
		t.Fatalf("enqueue on %s: %v", s.URL(), err)
	}
	return info.ID
}

// TestWorkerServersSkipsDeadServer: a Worker given a server that refuses
// connections first and a live one second holds its session with the live
// one and runs its tasks.
func TestWorkerServersSkipsDeadServer(t *testing.T) {
	t.Parallel()
	live := servertest.Start(t, server.Config{})
	ran := runOn(t, wtNewWorker(t, deadURL(t)+","+live.URL()))
	id := enqueueOn(t, live)
	if got := wtRecv(t, ran, 20*time.Second, "the live server's task"); got != id {
		t.Errorf("ran %s, want %s", got, id)
	}
}

// TestWorkerServersMovesOnWhenServerStops: a Worker holds its session with
// the first server; when that server shuts down (ending the session, a
// drain), the Worker opens its next session with the second server and
// runs the tasks enqueued there.
func TestWorkerServersMovesOnWhenServerStops(t *testing.T) {
	t.Parallel()
	a := servertest.Start(t, server.Config{})
	b := servertest.Start(t, server.Config{})
	ran := runOn(t, wtNewWorker(t, a.URL()+","+b.URL()))
	if id, got := enqueueOn(t, a), wtRecv(t, ran, 20*time.Second, "the first server's task"); got != id {
		t.Fatalf("ran %s, want %s", got, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if id, got := enqueueOn(t, b), wtRecv(t, ran, 20*time.Second, "the second server's task"); got != id {
		t.Errorf("ran %s, want %s", got, id)
	}
}

// TestWorkerServersBackoffPerRound: the servers of a round are tried at
// once, one after another, and the reconnect backoff is waited once per
// round that got no session, its attempt counting rounds; a session that
// was established resets it, and its end waits the first delay before
// the next server.
func TestWorkerServersBackoffPerRound(t *testing.T) {
	t.Parallel()
	dead, later := deadURL(t), deadURL(t) // later: a server starts there
	logs := &logCapture{}
	w := wtNewWorker(t, dead+","+later, conveyor.WithLogger(slog.New(logs.handler())),
		conveyor.WithReconnectBackoff(time.Millisecond, 2*time.Millisecond))
	ran := runOn(t, w)
	testwait.Until(t, 20*time.Second, "three failed rounds", func() bool { return logs.rounds() >= 3 })

	s := servertest.Start(t, server.Config{Listen: strings.TrimPrefix(later, "http://")})
	if id, got := enqueueOn(t, s), wtRecv(t, ran, 20*time.Second, "the task of the server that started"); got != id {
		t.Fatalf("ran %s, want %s", got, id)
	}
	healthy := len(logs.loop())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 20*time.Second, "the session's end", func() bool { return len(logs.loop()) > healthy })

	recs := logs.loop()
	for i, r := range recs[:healthy] {
		// Before the session: the dead server, then at once the other,
		// then the backoff of round i/2+1; the last round ends with the
		// session.
		want := logRecord{msg: msgNextServer, server: dead, next: later}
		if i%2 == 1 {
			want = logRecord{msg: msgReconnecting, server: later, next: dead, attempt: int64(i/2 + 1)}
		}
		if r != want {
			t.Fatalf("loop record %d: %+v, want %+v (records %+v)", i, r, want, recs)
		}
	}
	want := logRecord{msg: msgReconnecting, server: later, next: dead, attempt: 1}
	if r := recs[healthy]; r != want {
		t.Errorf("after the session ended: %+v, want %+v: the backoff starts over", r, want)
	}
}

// The messages of the Worker's reconnect loop.
const (
	msgNextServer   = "worker session ended; trying the next server"
	msgReconnecting = "worker session ended; reconnecting"
)

// logRecord is what a test reads of a loop's record.
type logRecord struct {
	msg, server, next string
	attempt           int64
}

// logCapture keeps the records of the Worker's reconnect loop.
type logCapture struct {
	mu   sync.Mutex
	recs []logRecord
}

func (c *logCapture) handler() slog.Handler { return captureHandler{c} }

// loop returns the loop's records so far.
func (c *logCapture) loop() []logRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]logRecord(nil), c.recs...)
}

// rounds counts the failed rounds logged.
func (c *logCapture) rounds() int {
	n := 0
	for _, r := range c.loop() {
		if r.msg == msgReconnecting {
			n++
		}
	}
	return n
}

type captureHandler struct{ c *logCapture }

func (captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h captureHandler) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h captureHandler) WithGroup(string) slog.Handler { return h }

func (h captureHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message != msgNextServer && r.Message != msgReconnecting {
		return nil
	}
	rec := logRecord{msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "server":
			rec.server = a.Value.String()
		case "next":
			rec.next = a.Value.String()
		case "attempt":
			rec.attempt = a.Value.Int64()
		}
		return true
	})
	h.c.mu.Lock()
	defer h.c.mu.Unlock()
	h.c.recs = append(h.c.recs, rec)
	return nil
}
