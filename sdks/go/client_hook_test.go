package conveyor_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// hookLog is an EnqueueHook that tags each task's metadata with its type
// and records what the Client reports.
type hookLog struct {
	mu       sync.Mutex
	before   []string // task types, in hook order
	outcomes map[string]error
}

type ctxKey struct{}

func (h *hookLog) hook(ctx context.Context, t *conveyor.Task) (*conveyor.Task, func(*conveyor.TaskInfo, error)) {
	h.mu.Lock()
	h.before = append(h.before, t.Type())
	h.mu.Unlock()
	tag, _ := ctx.Value(ctxKey{}).(string)
	return t.With(conveyor.MetadataKV("hooked", t.Type()+tag)), func(info *conveyor.TaskInfo, err error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if err == nil && (info == nil || info.Metadata["hooked"] != t.Type()+tag) {
			err = errors.New("the outcome does not carry the hook's metadata")
		}
		h.outcomes[t.Type()] = err
	}
}

// TestEnqueueHook: a hook amends each task sent (the caller's Task stays
// as it was) and is told each task's outcome, for every way to enqueue.
func TestEnqueueHook(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	h := &hookLog{outcomes: map[string]error{}}
	var order []string
	c := newClient(t, s.URL(), conveyor.WithEnqueueHook(h.hook), conveyor.WithEnqueueHook(
		func(_ context.Context, t *conveyor.Task) (*conveyor.Task, func(*conveyor.TaskInfo, error)) {
			return nil, func(*conveyor.TaskInfo, error) { order = append(order, "second done") }
		}), conveyor.WithEnqueueHook(nil))
	ctx := context.WithValue(context.Background(), ctxKey{}, "@ctx")

	info, err := c.Enqueue(ctx, "one", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := getTask(t, c, info.ID).Metadata["hooked"]; got != "one@ctx" {
		t.Errorf("stored metadata hooked = %q, want one@ctx", got)
	}
	if _, err := conveyor.EnqueueJSON(ctx, c, "json", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}

	id := ulid.Make().String()
	batch := []*conveyor.Task{conveyor.NewTask("b-ok", nil, conveyor.TaskID(id)), conveyor.NewTask("b-dup", nil, conveyor.TaskID(id)),
		nil, conveyor.NewTask("b-refused", nil, conveyor.Priority(1<<40))}
	res, err := c.EnqueueBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if batch[0].Proto().GetMetadata()["hooked"] != "" {
		t.Error("the hook changed the caller's Task")
	}
	if stored := getTask(t, c, res[0].Task.ID); !proto.Equal(stored.Proto(), res[0].Task.Proto()) {
		t.Errorf("EnqueueBatch answer %v differs from GetTask %v", res[0].Task.Proto(), stored.Proto())
	}
	if _, err := c.EnqueueTx(ctx, []*conveyor.Task{conveyor.NewTask("tx-a", nil), conveyor.NewTask("tx-b", nil)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.EnqueueTx(ctx, []*conveyor.Task{conveyor.NewTask("tx-bad", nil, conveyor.Priority(42))})
	if !errors.Is(err, conveyor.ErrInvalidArgument) {
		t.Fatalf("EnqueueTx of an invalid task: %v", err)
	}

	h.mu.Lock()
	defer h.mu.Unlock()
	// b-refused fails in the SDK, before any hook; the nil task is skipped.
	want := []string{"one", "json", "b-ok", "b-dup", "tx-a", "tx-b", "tx-bad"}
	if !slices.Equal(h.before, want) {
		t.Errorf("hooked %v, want %v", h.before, want)
	}
	for _, typ := range []string{"one", "json", "b-ok", "tx-a", "tx-b"} {
		if err, ok := h.outcomes[typ]; !ok || err != nil {
			t.Errorf("%s: outcome %v (reported %v), want success", typ, err, ok)
		}
	}
	if !errors.Is(h.outcomes["b-dup"], conveyor.ErrAlreadyExists) || !errors.Is(h.outcomes["tx-bad"], conveyor.ErrInvalidArgument) {
		t.Errorf("outcomes b-dup %v, tx-bad %v; want ErrAlreadyExists and ErrInvalidArgument", h.outcomes["b-dup"], h.outcomes["tx-bad"])
	}
	if len(order) != len(want) {
		t.Errorf("the second hook's outcome function ran %d times, want %d", len(order), len(want))
	}
}

// TestEnqueueHookSharedBatch: calls that share an EnqueueBatch each have
// their hook's task sent and their hook told their own outcome: the task
// with what the hook added, or the call's own error.
func TestEnqueueHookSharedBatch(t *testing.T) {
	t.Parallel()
	h := &hookLog{outcomes: map[string]error{}}
	e := batchSetup(t, conveyor.WithEnqueueInFlight(1), conveyor.WithEnqueueHook(h.hook))
	release := e.holdFirst()
	id := ulid.Make().String()
	calls := map[string]<-chan enqueued{
		"ok-a":  e.go_(context.Background(), "ok-a", []byte(`"a"`)),
		"ok-b":  e.go_(context.Background(), "ok-b", nil, conveyor.MetadataKV("own", "b")),
		"dup-1": e.go_(context.Background(), "dup-1", nil, conveyor.TaskID(id)),
		"dup-2": e.go_(context.Background(), "dup-2", nil, conveyor.TaskID(id)),
		"bad":   e.go_(context.Background(), "bad", nil, conveyor.Priority(42)),
	}
	e.waitGathered(len(calls))
	if r := release(); r.err != nil {
		t.Fatal(r.err)
	}
	got := map[string]enqueued{}
	for name, ch := range calls {
		got[name] = wtRecv(t, ch, 10*time.Second, name+"'s outcome")
	}
	eq(t, "EnqueueBatch RPCs", e.gate.count("EnqueueBatch"), 1)

	for _, name := range []string{"ok-a", "ok-b"} {
		r := got[name]
		if r.err != nil || r.info.Type != name || r.info.Metadata["hooked"] != name {
			t.Errorf("%s: %+v, %v; want its own task with the hook's metadata", name, r.info, r.err)
		}
	}
	if got["ok-b"].err == nil && got["ok-b"].info.Metadata["own"] != "b" {
		t.Errorf("ok-b lost its own metadata: %v", got["ok-b"].info.Metadata)
	}
	d1, d2 := got["dup-1"], got["dup-2"]
	if (d1.err == nil) == (d2.err == nil) {
		t.Fatalf("dup-1 %v, dup-2 %v: want exactly one to fail", d1.err, d2.err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for name, r := range got {
		err, ok := h.outcomes[name]
		switch {
		case !ok:
			t.Errorf("%s: the hook was not told its outcome", name)
		case r.err == nil && err != nil:
			t.Errorf("%s: the call succeeded, the hook was told %v", name, err)
		case r.err != nil && !errors.Is(err, r.err):
			t.Errorf("%s: the call failed with %v, the hook was told %v", name, r.err, err)
		}
	}
	if !errors.Is(h.outcomes["bad"], conveyor.ErrInvalidArgument) {
		t.Errorf("bad: the hook was told %v, want ErrInvalidArgument", h.outcomes["bad"])
	}
}
