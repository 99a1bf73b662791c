package conveyortest_test

import (
	"context"
	"encoding/json"
	"testing"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/sdks/go/conveyortest"
)

// welcome is a typed kind, as users declare theirs.
type welcome struct {
	To   string `json:"to"`
	Lang string `json:"lang,omitempty"`
}

func (welcome) Kind() string { return "email:welcome" }

func (welcome) KindOptions() []conveyor.TaskOption {
	return []conveyor.TaskOption{conveyor.Queue("mail")}
}

func enqueue(t *testing.T, c *conveyor.Client, typ, payload string, opts ...conveyor.TaskOption) *conveyor.TaskInfo {
	t.Helper()
	info, err := c.Enqueue(context.Background(), typ, []byte(payload), opts...)
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	return info
}

func TestRequireEnqueued(t *testing.T) {
	t.Parallel()
	s := conveyortest.Start(t)
	c := s.Client()
	a := enqueue(t, c, "report", `{"id": 7, "tags": ["x", "y"]}`, conveyor.Queue("reports"))
	b := enqueue(t, c, "report", `{"id": 8}`, conveyor.Queue("reports"))
	enqueue(t, c, "other", `{"id": 7}`)

	// The payload as JSON text, with other spacing, key order and number
	// spelling, and as a Go value.
	got := conveyortest.RequireEnqueued(t, s, conveyortest.Want{
		Queue: "reports", Type: "report", Payload: []byte(`{"tags":["x","y"],"id":7.0}`)})
	if len(got) != 1 || got[0].ID != a.ID {
		t.Fatalf("RequireEnqueued = %v, want task %s alone", got, a.ID)
	}
	if got[0].State != conveyor.TaskStatePending || string(got[0].Payload) != `{"id": 7, "tags": ["x", "y"]}` {
		t.Errorf("RequireEnqueued returned %+v, want the stored task", got[0])
	}
	got = conveyortest.RequireEnqueued(t, s, conveyortest.Want{Payload: map[string]any{"id": 8}})
	if len(got) != 1 || got[0].ID != b.ID {
		t.Errorf("RequireEnqueued by a Go value = %v, want task %s", got, b.ID)
	}

	// Count is exact, and the tasks come in queue order, then id order.
	got = conveyortest.RequireEnqueued(t, s, conveyortest.Want{Queue: "reports", Count: 2, State: conveyor.TaskStatePending})
	if len(got) != 2 || got[0].ID != a.ID || got[1].ID != b.ID {
		t.Errorf("RequireEnqueued(Count 2) = %v, want %s then %s", got, a.ID, b.ID)
	}
	if got := conveyortest.RequireEnqueued(t, s, conveyortest.Want{}); len(got) != 3 {
		t.Errorf("RequireEnqueued(Want{}) = %d tasks, want all 3", len(got))
	}
}

func TestRequireEnqueuedKind(t *testing.T) {
	t.Parallel()
	s := conveyortest.Start(t)
	c := s.Client()
	if _, err := conveyor.EnqueueKind(context.Background(), c, welcome{To: "a@example.com"}); err != nil {
		t.Fatalf("EnqueueKind: %v", err)
	}
	// A kind names the type: the payload alone finds the task.
	got := conveyortest.RequireEnqueued(t, s, conveyortest.Want{Payload: welcome{To: "a@example.com"}})
	if got[0].Type != "email:welcome" || got[0].Queue != "mail" {
		t.Errorf("found %s in %s, want email:welcome in mail", got[0].Type, got[0].Queue)
	}
	conveyortest.RequireNotEnqueued(t, s, conveyortest.Want{Payload: welcome{To: "b@example.com"}})

	msg := failure(t, func(tb testing.TB) {
		conveyortest.RequireEnqueued(tb, s, conveyortest.Want{Type: "other", Payload: welcome{}})
	})
	contains(t, "a Type contradicting the kind", msg, `Want.Type is "other"`, `"email:welcome"`)
}

func TestRequireEnqueuedFailure(t *testing.T) {
	t.Parallel()
	s := conveyortest.Start(t)
	c := s.Client()

	msg := failure(t, func(tb testing.TB) { conveyortest.RequireEnqueued(tb, s, conveyortest.Want{Type: "report"}) })
	contains(t, "the failure on an empty server", msg, "no task matches {queue=* type=report state=* payload=*}",
		"the server holds no task")

	near := enqueue(t, c, "report", `{"id":7}`)
	other := enqueue(t, c, "invoice", `{"id":8}`)
	msg = failure(t, func(tb testing.TB) {
		conveyortest.RequireEnqueued(tb, s, conveyortest.Want{Type: "report", Payload: json.RawMessage(`{"id":8}`)})
	})
	contains(t, "the failure on a near miss", msg,
		`no task matches {queue=* type=report state=* payload={"id":8}}`,
		"the server holds 2 tasks:",
		near.ID+` queue=default type=report state=pending payload={"id":7}  (differs in payload)`,
		other.ID+` queue=default type=invoice state=pending payload={"id":8}  (differs in type)`)

	msg = failure(t, func(tb testing.TB) {
		conveyortest.RequireEnqueued(tb, s, conveyortest.Want{State: conveyor.TaskStateCompleted})
	})
	contains(t, "the failure on a state", msg, "(differs in state)")

	msg = failure(t, func(tb testing.TB) { conveyortest.RequireEnqueued(tb, s, conveyortest.Want{Count: 1}) })
	contains(t, "the failure on a count", msg, "2 tasks match", "want 1", "(matches)")

	msg = failure(t, func(tb testing.TB) { conveyortest.RequireEnqueued(tb, s, conveyortest.Want{Queue: "none"}) })
	contains(t, "the failure on an empty queue", msg, `queue "none" holds no task`)
}

func TestRequireNotEnqueued(t *testing.T) {
	t.Parallel()
	s := conveyortest.Start(t)
	info := enqueue(t, s.Client(), "report", `{"id":7}`)

	conveyortest.RequireNotEnqueued(t, s, conveyortest.Want{Type: "invoice"})
	conveyortest.RequireNotEnqueued(t, s, conveyortest.Want{Type: "report", State: conveyor.TaskStateCompleted})

	msg := failure(t, func(tb testing.TB) { conveyortest.RequireNotEnqueued(tb, s, conveyortest.Want{Type: "report"}) })
	contains(t, "the failure", msg, "1 tasks match {queue=* type=report", "want none", info.ID)

	msg = failure(t, func(tb testing.TB) { conveyortest.RequireNotEnqueued(tb, s, conveyortest.Want{Count: 1}) })
	contains(t, "a Count", msg, "Want.Count is 1; it must be 0")
}

// TestPayloadComparison pins what counts as the same payload.
func TestPayloadComparison(t *testing.T) {
	t.Parallel()
	s := conveyortest.Start(t)
	c := s.Client()
	enqueue(t, c, "json", `{"n": 1, "big": 12345678901234567891, "s": "1"}`, conveyor.Queue("json"))
	enqueue(t, c, "bytes", "not json", conveyor.Queue("bytes"), conveyor.ContentType("text/plain"))

	for _, tc := range []struct {
		name    string
		queue   string
		payload any
		match   bool
	}{
		{"same value, other spelling", "json", `{"s":"1","big":12345678901234567891,"n":1e0}`, true},
		{"a Go map", "json", map[string]any{"n": 1, "big": json.Number("12345678901234567891"), "s": "1"}, true},
		{"a large number one off", "json", `{"n":1,"big":12345678901234567890,"s":"1"}`, false},
		{"a number for a string", "json", `{"n":1,"big":12345678901234567891,"s":1}`, false},
		{"a field missing", "json", `{"n":1,"s":"1"}`, false},
		{"bytes, exact", "bytes", "not json", true},
		{"bytes, other", "bytes", "not json!", false},
	} {
		want := conveyortest.Want{Queue: tc.queue, Payload: tc.payload}
		if text, ok := tc.payload.(string); ok {
			want.Payload = []byte(text) // JSON text, not a Go string to encode
		}
		if tc.match {
			conveyortest.RequireEnqueued(t, s, want)
		} else {
			conveyortest.RequireNotEnqueued(t, s, want)
		}
	}
}
