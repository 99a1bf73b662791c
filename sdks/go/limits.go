package conveyor

import (
	"fmt"
	"strings"
	"unicode/utf8"

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
