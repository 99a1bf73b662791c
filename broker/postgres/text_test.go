package postgres_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/broker/postgres"
)

// TestNULCharacters: a producer's text holding a NUL character, which
// PostgreSQL cannot store, is refused naming its field; a worker's
// message holding one is recorded with it replaced, never refused (its
// Result must be applied).
func TestNULCharacters(t *testing.T) {
	t.Parallel()
	b := openEngine(t, t.TempDir(), postgres.Config{})
	for _, c := range []struct {
		field string
		set   func(nt *broker.NewTask)
	}{
		{"type", func(nt *broker.NewTask) { nt.Type = "a\x00b" }},
		{"metadata", func(nt *broker.NewTask) { nt.Metadata = map[string]string{"k": "v\x00"} }},
		{"unique_key", func(nt *broker.NewTask) { nt.UniqueKey = "\x00" }},
	} {
		nt := bt.NewTask("q")
		c.set(&nt)
		res, err := b.Enqueue(t.Context(), broker.EnqueueParams{Tasks: bt.WithStates([]broker.NewTask{nt}, bt.T0), Now: bt.T0})
		if err != nil {
			t.Fatal(err)
		}
		if !errors.Is(res[0].Err, broker.ErrInvalidArgument) || !strings.Contains(res[0].Err.Error(), c.field) {
			t.Errorf("a %s with a NUL: %v, want invalid argument naming it", c.field, res[0].Err)
		}
	}
	task := bt.EnqueueOne(t, b, bt.T0, bt.NewTask("q"))
	l := bt.LeaseOne(t, b, "s1", "q", bt.T0)
	if err := b.Progress(t.Context(), broker.ProgressParams{SessionID: "s1", Lease: bt.Ref(l), Percent: 5, Message: "p\x00q"}); err != nil {
		t.Fatalf("Progress with a NUL: %v", err)
	}
	bt.Fail(t, b, "s1", l, "boom\x00", bt.T0, bt.T0.Add(time.Hour))
	got := bt.RequireState(t, b, task.ID, broker.StateRetry)
	if got.LastError != "boom\uFFFD" {
		t.Fatalf("last error %q, want the NUL replaced", got.LastError)
	}
}
