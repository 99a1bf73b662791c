package conveyor

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

func TestBoundText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		max      int
		want     string
	}{
		{"short", "abc", 20, "abc"},
		{"exactly the bound", strings.Repeat("a", 20), 20, strings.Repeat("a", 20)},
		{"one over", strings.Repeat("a", 21), 20, "aaaa … [truncated]"},
		{"cut inside a rune", "aaa€€€€€€€", 20, "aaa … [truncated]"}, // € is 3 bytes: the 4th byte starts the cut rune
		{"cut after a rune", "aaaa€€€€€€€", 20, "aaaa … [truncated]"},
		{"invalid UTF-8 repaired", "a\xffb", 20, "a\uFFFDb"},
		{"repaired, then cut", strings.Repeat("\xffa", 10), 20, "\uFFFDa … [truncated]"},
	} {
		got := boundText(tc.in, tc.max)
		if got != tc.want {
			t.Errorf("%s: boundText(%q, %d) = %q, want %q", tc.name, tc.in, tc.max, got, tc.want)
		}
		if len(got) > tc.max || !utf8.ValidString(got) {
			t.Errorf("%s: %q is %d bytes or invalid UTF-8", tc.name, got, len(got))
		}
	}
}

// TestBoundBatch: a batch of results whose messages and results pass one
// frame keeps those that fit as they are; each after them loses its bytes,
// a success among them becomes a failed attempt, and other outcomes stay.
// The encoded frame then fits.
func TestBoundBatch(t *testing.T) {
	t.Parallel()
	msg := strings.Repeat("m", MaxErrorMessageBytes)
	var rs []*conveyorv1.Result
	for i := range 3000 { // 3,000 messages of 16 KiB: 48 MiB
		r := &conveyorv1.Result{TaskId: fmt.Sprint(i), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY, ErrorMsg: msg}
		if i%2 == 0 {
			r = &conveyorv1.Result{TaskId: fmt.Sprint(i), Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS, Result: []byte(msg)}
		}
		rs = append(rs, r)
	}
	boundBatch(rs)
	frame := &conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_BatchResult{BatchResult: &conveyorv1.BatchResult{Results: rs}}}
	if n := proto.Size(frame); n > maxFrameBytes {
		t.Fatalf("the frame is %d bytes, past %d", n, maxFrameBytes)
	}
	kept := 0
	for i, r := range rs {
		whole := len(r.Result) == len(msg) || r.ErrorMsg == msg
		if whole {
			if kept != i {
				t.Fatalf("result %d kept whole after %d shrunk ones", i, i-kept)
			}
			kept++
			continue
		}
		want := conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY
		if i%2 == 0 {
			want = conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY
		}
		if r.Outcome != want || len(r.Result) != 0 || !strings.Contains(r.ErrorMsg, "32 MiB") {
			t.Fatalf("result %d after the bound: %v, %d result bytes, %q", i, r.Outcome, len(r.Result), r.ErrorMsg)
		}
	}
	if kept < 2000 || kept == len(rs) {
		t.Fatalf("%d of %d results kept whole, want all that fit in 32 MiB (about 2,040)", kept, len(rs))
	}
}

// TestHeartbeatFrames: deliveries fill a Heartbeat up to the bound, a
// delivery's two ids never split across frames, and an idle session still
// has its one (empty) Heartbeat.
func TestHeartbeatFrames(t *testing.T) {
	t.Parallel()
	if got := newHeartbeatFrames(4).frames; len(got) != 1 || proto.Size(got[0]) != 0 {
		t.Fatalf("no deliveries: %v, want one empty heartbeat", got)
	}
	h := newHeartbeatFrames(4)
	for _, d := range [][2]string{{"t1", "a1"}, {"t2", "a2"}, {"t3", ""}, {"", "a4"}, {"t5", "a5"}} {
		h.add(d[0], d[1])
	}
	want := []*conveyorv1.Heartbeat{
		{ActiveTaskIds: []string{"t1", "t2"}, ActiveAttemptIds: []string{"a1", "a2"}},
		{ActiveTaskIds: []string{"t3", "t5"}, ActiveAttemptIds: []string{"a4", "a5"}},
	}
	if len(h.frames) != len(want) {
		t.Fatalf("%d frames %v, want %v", len(h.frames), h.frames, want)
	}
	for i := range want {
		if !proto.Equal(h.frames[i], want[i]) {
			t.Errorf("frame %d = %v, want %v", i, h.frames[i], want[i])
		}
	}
}
