package sessions

import (
	"slices"
	"testing"
	"time"
)

// heldAttempts sends a heartbeat's ids through held and names the
// deliveries it would extend, by attempt id, sorted.
func heldAttempts(f *inflight, taskIDs, attemptIDs []string) []string {
	var out []string
	for _, m := range f.held(taskIDs, attemptIDs) {
		out = append(out, m.attemptID)
	}
	slices.Sort(out)
	return out
}

func deliver(f *inflight, taskID, attemptID string, token uint64) {
	f.add(&delivery{members: []*member{{taskID: taskID, attemptID: attemptID, token: token}}})
}

// A heartbeat extends each delivery it names by attempt id, and by task id
// every task none of whose deliveries it names by attempt id: a worker
// that echoes attempt ids for some tasks only keeps the others alive,
// while a lapsed attempt it still lists does not keep its task's
// redelivery alive through the task id they share.
func TestHeartbeatIDsPickTheirDeliveries(t *testing.T) {
	f := newInflight()
	deliver(f, "a", "a-1", 1)
	deliver(f, "b", "b-1", 2)
	deliver(f, "c", "c-1", 3)
	if !f.lapse("c", 3, time.Now(), time.Minute) {
		t.Fatal("c's first delivery did not lapse")
	}
	deliver(f, "c", "c-2", 4)

	for _, tc := range []struct {
		name                string
		taskIDs, attemptIDs []string
		want                []string
	}{
		{"task ids only", []string{"a", "b", "c"}, nil, []string{"a-1", "b-1", "c-2"}},
		{"attempt ids only", nil, []string{"a-1", "c-2"}, []string{"a-1", "c-2"}},
		{"attempt ids for some tasks", []string{"a", "b"}, []string{"a-1"}, []string{"a-1", "b-1"}},
		{"a lapsed attempt fences its task", []string{"a", "c"}, []string{"a-1", "c-1"}, []string{"a-1"}},
		{"both attempts of a task", []string{"c"}, []string{"c-1", "c-2"}, []string{"c-2"}},
		{"each delivery once", []string{"a", "a"}, []string{"a-1", "a-1"}, []string{"a-1"}},
		{"unknown ids", []string{"x"}, []string{"y-1"}, nil},
	} {
		if got := heldAttempts(f, tc.taskIDs, tc.attemptIDs); !slices.Equal(got, tc.want) {
			t.Errorf("%s: tasks %v, attempts %v extend %v, want %v", tc.name, tc.taskIDs, tc.attemptIDs, got, tc.want)
		}
	}
}
