package conveyortest

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// Want describes the tasks RequireEnqueued and RequireNotEnqueued look
// for. A zero field matches anything.
type Want struct {
	// Queue is the task's queue; empty matches every queue.
	Queue string
	// Type is the task's type; empty matches every type, unless Payload
	// is a conveyor.Kind, whose Kind() it then defaults to.
	Type string
	// Payload is the task's payload; nil matches any. A []byte or
	// json.RawMessage is the payload's bytes; any other value (a struct, a
	// map, a string) is encoded with encoding/json first. Payloads are
	// compared as JSON values, so spacing, key order and the spelling of a
	// number do not matter; when either side is not JSON, byte for byte.
	Payload any
	// State is the task's state; conveyor.TaskStateUnspecified matches
	// every state.
	State conveyor.TaskState
	// Count is how many tasks must match, exactly; 0 means at least one.
	// RequireNotEnqueued refuses it.
	Count int
}

// maxListed bounds the tasks a failure lists, so that a server with
// thousands of tasks still gives a readable message.
const maxListed = 20

// maxShownPayload bounds each payload a failure shows.
const maxShownPayload = 200

// RequireEnqueued fails t unless s holds tasks that match want (exactly
// want.Count of them, when it is set), and returns those tasks as stored
// now, in queue order (queues by name) and then id order. The failure
// lists the tasks that are there, each with the fields in which it differs
// from want, so that a near miss is plain. It reads the tasks through the
// AdminService, as an operator would; a task purged once it completed
// (Retention(0)) is no longer there.
func RequireEnqueued(t testing.TB, s *Server, want Want) []*conveyor.TaskInfo {
	t.Helper()
	m, err := newMatcher(want)
	if err != nil {
		t.Fatalf("conveyortest: RequireEnqueued: %v", err)
	}
	all, matched := s.find(t, m)
	switch {
	case len(matched) == 0:
		t.Fatalf("conveyortest: no task matches %s\n%s", m, describe(m, all))
	case want.Count > 0 && len(matched) != want.Count:
		t.Fatalf("conveyortest: %d tasks match %s, want %d\n%s", len(matched), m, want.Count, describe(m, all))
	}
	return s.read(t, matched)
}

// RequireNotEnqueued fails t if s holds a task that matches want, listing
// the ones that do. want.Count must be 0.
func RequireNotEnqueued(t testing.TB, s *Server, want Want) {
	t.Helper()
	if want.Count != 0 {
		t.Fatalf("conveyortest: RequireNotEnqueued: Want.Count is %d; it must be 0 (no task may match)", want.Count)
	}
	m, err := newMatcher(want)
	if err != nil {
		t.Fatalf("conveyortest: RequireNotEnqueued: %v", err)
	}
	_, matched := s.find(t, m)
	if len(matched) > 0 {
		t.Fatalf("conveyortest: %d tasks match %s, want none\n%s", len(matched), m, describe(m, matched))
	}
}

// find lists the tasks of m's queue (every queue, if it names none) and
// returns them with those that match m.
func (s *Server) find(t testing.TB, m *matcher) (all, matched []*conveyorv1.TaskInfo) {
	t.Helper()
	all, err := s.listTasks(t.Context(), m.want.Queue, conveyorv1.TaskState_TASK_STATE_UNSPECIFIED)
	if err != nil {
		t.Fatalf("conveyortest: %v", err)
	}
	for _, task := range all {
		if len(m.misses(task)) == 0 {
			matched = append(matched, task)
		}
	}
	return all, matched
}

// read returns the tasks as the SDK's Client reads them.
func (s *Server) read(t testing.TB, tasks []*conveyorv1.TaskInfo) []*conveyor.TaskInfo {
	t.Helper()
	out := make([]*conveyor.TaskInfo, len(tasks))
	for i, task := range tasks {
		info, err := s.client.GetTask(t.Context(), task.GetId())
		if err != nil {
			t.Fatalf("conveyortest: read task %s, which matched: %v", task.GetId(), err)
		}
		out[i] = info
	}
	return out
}

// matcher is a Want made ready to compare.
type matcher struct {
	want    Want
	payload *wantPayload // nil: any payload
}

func newMatcher(want Want) (*matcher, error) {
	if want.Count < 0 {
		return nil, fmt.Errorf("Want.Count is %d; it must be 0 (at least one) or more", want.Count)
	}
	if k, ok := want.Payload.(conveyor.Kind); ok {
		switch {
		case want.Type == "":
			want.Type = k.Kind()
		case want.Type != k.Kind():
			return nil, fmt.Errorf("Want.Type is %q but Want.Payload is a %T, whose kind is %q", want.Type, k, k.Kind())
		}
	}
	m := &matcher{want: want}
	if want.Payload != nil {
		p, err := newWantPayload(want.Payload)
		if err != nil {
			return nil, err
		}
		m.payload = p
	}
	return m, nil
}

// misses names the fields in which task differs from the Want.
func (m *matcher) misses(task *conveyorv1.TaskInfo) []string {
	var out []string
	if m.want.Queue != "" && task.GetQueue() != m.want.Queue {
		out = append(out, "queue")
	}
	if m.want.Type != "" && task.GetType() != m.want.Type {
		out = append(out, "type")
	}
	if m.want.State != conveyor.TaskStateUnspecified && conveyor.TaskState(task.GetState()) != m.want.State {
		out = append(out, "state")
	}
	if m.payload != nil && !m.payload.matches(task.GetPayload()) {
		out = append(out, "payload")
	}
	return out
}

// String describes the Want, with "*" for a field that matches anything.
func (m *matcher) String() string {
	field := func(v string) string {
		if v == "" {
			return "*"
		}
		return v
	}
	state, payload := "*", "*"
	if m.want.State != conveyor.TaskStateUnspecified {
		state = m.want.State.String()
	}
	if m.payload != nil {
		payload = shown(m.payload.raw)
	}
	return fmt.Sprintf("{queue=%s type=%s state=%s payload=%s}", field(m.want.Queue), field(m.want.Type), state, payload)
}

// describe lists tasks, each with the fields in which it misses m.
func describe(m *matcher, tasks []*conveyorv1.TaskInfo) string {
	if len(tasks) == 0 {
		where := "the server holds no task"
		if m.want.Queue != "" {
			where = fmt.Sprintf("queue %q holds no task", m.want.Queue)
		}
		return where
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the server holds %d tasks%s:", len(tasks), inQueue(m.want.Queue))
	for i, task := range tasks {
		if i == maxListed {
			fmt.Fprintf(&b, "\n  … and %d more", len(tasks)-maxListed)
			break
		}
		fmt.Fprintf(&b, "\n  %s queue=%s type=%s state=%s payload=%s", task.GetId(), task.GetQueue(), task.GetType(),
			conveyor.TaskState(task.GetState()), shown(task.GetPayload()))
		if miss := m.misses(task); len(miss) > 0 {
			fmt.Fprintf(&b, "  (differs in %s)", strings.Join(miss, ", "))
		} else {
			b.WriteString("  (matches)")
		}
	}
	return b.String()
}

func inQueue(q string) string {
	if q == "" {
		return ""
	}
	return fmt.Sprintf(" in queue %q", q)
}

// shown is a payload as a failure shows it: as text when it is UTF-8,
// cut to maxShownPayload bytes.
func shown(p []byte) string {
	if !utf8.Valid(p) {
		return fmt.Sprintf("<%d bytes, not UTF-8>", len(p))
	}
	if len(p) > maxShownPayload {
		cut := maxShownPayload
		for cut > 0 && !utf8.RuneStart(p[cut]) {
			cut--
		}
		return string(p[:cut]) + "…"
	}
	return string(p)
}
