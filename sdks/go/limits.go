package conveyor

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// Bounds on what a Worker sends for one task. The server enforces the same
// numbers; the Worker checks them first, because a frame the server refuses
// would cost the whole session (every task it holds) rather than the one
// task at fault.
const (
	// MaxResultBytes bounds the result bytes of one task (1 MiB), as set
	// with Delivery.SetResult. A larger result is not sent: the task is
	// reported as a failed attempt (RETRY) whose error says how large the
	// result was, so it is retried, then archived once its retries are
	// spent, like any other failure.
	MaxResultBytes = 1 << 20
	// MaxErrorMessageBytes bounds the error message reported for a failed
	// task (16 KiB). A longer message is cut at a UTF-8 boundary and ends
	// with " … [truncated]", the whole within the bound.
	MaxErrorMessageBytes = 16 << 10
	// MaxProgressMessageBytes bounds the message of Delivery.Progress
	// (1 KiB), truncated as error messages are.
	MaxProgressMessageBytes = 1 << 10
	// maxFrameBytes bounds one frame the Worker sends (32 MiB), as the
	// server bounds every frame it reads; see boundBatch.
	maxFrameBytes = 32 << 20
	// frameSlack is left of maxFrameBytes for the frame's own fields
	// around a BatchResult's results.
	frameSlack = 64
	// maxHeartbeatIDs bounds the ids, task ids and attempt ids together,
	// of one Heartbeat, as the server bounds them: a fencing server counts
	// each held task twice, so six full batches (of 10,000 members) would
	// pass it. A session holding more is heartbeated in several frames;
	// see heartbeatFrames.
	maxHeartbeatIDs = 100_000
	// maxLabelBytes bounds a Hello's strings, the release id among them
	// (1,024 bytes): a longer one gets the Hello refused.
	maxLabelBytes = 1024
)

// truncatedSuffix ends a message cut to fit its bound.
const truncatedSuffix = " … [truncated]"

// boundText makes s valid UTF-8 (a protobuf string must be, or the frame
// fails to encode and the session breaks) and at most max bytes, cutting it
// at a rune boundary and marking the cut with truncatedSuffix.
func boundText(s string, max int) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if len(s) <= max {
		return s
	}
	cut := max - len(truncatedSuffix)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + truncatedSuffix
}

// boundResult brings r within the bounds before it is sent: an oversized
// result turns the outcome into a failed attempt, and the error message is
// truncated.
func boundResult(r *conveyorv1.Result) {
	if n := len(r.Result); n > MaxResultBytes {
		r.Outcome = conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY
		r.ErrorMsg = fmt.Sprintf("result is %d bytes; the limit is %d (1 MiB)", n, MaxResultBytes)
		r.Result = nil
	}
	r.ErrorMsg = boundText(r.ErrorMsg, MaxErrorMessageBytes)
}

// boundBatch keeps a BatchResult's results within one frame: 10,000
// members of up to 1 MiB each would far pass the bound, and the server
// would refuse the frame and end the session. The results are taken in
// order while they fit, with room kept for the rest; each one after that
// loses its result bytes and message, and a success among them becomes a
// failed attempt (RETRY) whose error names the bound: the member comes
// back alone, where its result fits.
func boundBatch(rs []*conveyorv1.Result) {
	rest := make([]int, len(rs)+1) // rest[i]: the room results i.. take shrunk
	for i := len(rs) - 1; i >= 0; i-- {
		rest[i] = rest[i+1] + framedSize(shrunk(rs[i]))
	}
	room := maxFrameBytes - frameSlack
	for i, r := range rs {
		n := framedSize(r)
		if n+rest[i+1] > room {
			for j, r := range rs[i:] {
				rs[i+j] = shrunk(r)
			}
			return
		}
		room -= n
	}
}

// framedSize is what r takes in a BatchResult: its tag, length and bytes.
func framedSize(r *conveyorv1.Result) int {
	return protowire.SizeTag(1) + protowire.SizeBytes(proto.Size(r))
}

// shrunk is r without its result bytes and message, for a batch frame it
// did not fit in.
func shrunk(r *conveyorv1.Result) *conveyorv1.Result {
	outcome := r.GetOutcome()
	if outcome == conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		outcome = conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY
	}
	return &conveyorv1.Result{TaskId: r.GetTaskId(), AttemptId: r.GetAttemptId(), Outcome: outcome, ErrorMsg: batchOverflowMessage}
}

// batchOverflowMessage is the error of a member whose result did not fit.
const batchOverflowMessage = "the batch's results pass the 32 MiB a frame may carry: this task's did not fit, and it runs again alone"
