package scheduler_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/conveyor-dev/conveyor/scheduler"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestLoopRunsWhenDueAndWhenKicked checks the three reasons a Loop runs its
// job: at start, when the time it asked for comes, and on Kick, and that
// it sleeps (runs nothing) when the job asks for no time and nobody kicks.
func TestLoopRunsWhenDueAndWhenKicked(t *testing.T) {
	t.Parallel()
	runs := make(chan time.Time, 16)
	nextIn := make(chan time.Duration, 16) // what the job answers, run by run
	job := func(_ context.Context, now time.Time) (time.Time, error) {
		runs <- now
		select {
		case d := <-nextIn:
			return now.Add(d), nil
		default:
			return time.Time{}, nil // nothing waiting: sleep until kicked
		}
	}
	l := scheduler.NewLoop("test", job, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	nextIn <- 20 * time.Millisecond // the first run asks to run again soon
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := l.Stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()

	wait := func(what string) time.Time {
		t.Helper()
		select {
		case at := <-runs:
			return at
		case <-time.After(5 * time.Second):
			t.Fatalf("the loop did not run %s", what)
		}
		return time.Time{}
	}
	first := wait("at start")
	if second := wait("when due"); second.Sub(first) < 20*time.Millisecond {
		t.Fatalf("ran %v after the first run, before the 20ms it asked for", second.Sub(first))
	}
	select {
	case <-runs:
		t.Fatal("ran with nothing due and no kick")
	case <-time.After(100 * time.Millisecond):
	}
	l.Kick()
	wait("after Kick")
}

// TestLoopStopIsIdempotent: Stop may be called twice, and on a loop never
// started.
func TestLoopStopIsIdempotent(t *testing.T) {
	t.Parallel()
	job := func(context.Context, time.Time) (time.Time, error) { return time.Time{}, nil }
	idle := scheduler.NewLoop("idle", job, nil, slog.New(slog.DiscardHandler))
	if err := idle.Stop(context.Background()); err != nil {
		t.Fatalf("Stop of a loop never started: %v", err)
	}
	l := scheduler.NewLoop("test", job, nil, slog.New(slog.DiscardHandler))
	if err := l.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := l.Stop(context.Background()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
	}
}
