package push

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// MaxResponseBytes bounds the body of an endpoint's answer the server
// reads: a PushResponse with the largest result (base64 in JSON) and an
// error message fits well within it. A longer body is not read further.
const MaxResponseBytes = 2 << 20

// MaxRetryAfter caps how long a Retry-After may hold a task back.
const MaxRetryAfter = 24 * time.Hour

// The classes of an invocation's answer, the label of
// conveyor_push_requests_total: the first four are a PushResponse's
// outcome (proof of what the handler did); the others prove nothing, and
// count as a failed attempt.
const (
	ClassSuccess     = "success"
	ClassRetry       = "retry"
	ClassSkipRetry   = "skip_retry"
	ClassReleased    = "released"
	ClassHTTPStatus  = "http_status"  // a status other than 2xx
	ClassBadResponse = "bad_response" // a 2xx whose body is no PushResponse with an outcome
	ClassTimeout     = "timeout"      // no answer by the deadline
	ClassConnection  = "connection"   // refused, reset, or another transport error
	ClassAborted     = "aborted"      // canceled, lapsed, or the server stopping
)

// answer is what one invocation's answer says: a proven outcome, or an
// ambiguous one counted as RETRY with why in errMsg.
type answer struct {
	class   string
	outcome broker.Outcome
	errMsg  string
	result  []byte
	// retryAfter, when set, is the earliest the retry may be due (a 429 or
	// 503 with Retry-After).
	retryAfter time.Time
	// gone is set by a 410: the endpoint asks to be sent nothing more.
	gone bool
}

func ambiguous(class, msg string) answer {
	return answer{class: class, outcome: broker.OutcomeRetry, errMsg: msg}
}

// classify reads an endpoint's response (resp nil when the request
// failed with err; the caller closes its body); cause is why the request's context ended, if it did;
// limit is how long the invocation was allowed; at is when the answer
// arrived.
func classify(resp *http.Response, err, cause error, limit time.Duration, at time.Time) answer {
	if resp == nil {
		return failed(err, cause, limit)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		a := ambiguous(ClassHTTPStatus, fmt.Sprintf("push: HTTP %d", resp.StatusCode))
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			if d, ok := retryAfter(resp.Header.Get("Retry-After"), at); ok {
				a.retryAfter = at.Add(d)
			}
		}
		a.gone = resp.StatusCode == http.StatusGone
		return a
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return failed(err, cause, limit)
	}
	if len(body) > MaxResponseBytes {
		return ambiguous(ClassBadResponse, fmt.Sprintf("push: HTTP %d with a body over %d bytes", resp.StatusCode, MaxResponseBytes))
	}
	return proven(resp.StatusCode, body)
}

// proven reads a 2xx body as a PushResponse: with an outcome, it is the
// attempt's Result.
func proven(status int, body []byte) answer {
	var pr conveyorv1.PushResponse
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, &pr); err != nil {
		return ambiguous(ClassBadResponse, fmt.Sprintf("push: HTTP %d with a body that is not a PushResponse: %s", status,
			wire.TruncateUTF8(err.Error(), 200)))
	}
	errMsg := wire.TruncateUTF8(pr.GetErrorMsg(), wire.MaxErrorMessageBytes)
	switch pr.GetOutcome() {
	case conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS:
		if n := len(pr.GetResult()); n > wire.MaxResultBytes {
			return ambiguous(ClassBadResponse, fmt.Sprintf("push: the endpoint's result is %d bytes; the limit is %d (1 MiB)", n, wire.MaxResultBytes))
		}
		return answer{class: ClassSuccess, outcome: broker.OutcomeSuccess, result: pr.GetResult()}
	case conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY:
		return answer{class: ClassRetry, outcome: broker.OutcomeRetry, errMsg: errMsg}
	case conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY:
		return answer{class: ClassSkipRetry, outcome: broker.OutcomeSkipRetry, errMsg: errMsg}
	case conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED:
		return answer{class: ClassReleased, outcome: broker.OutcomeReleased}
	}
	return ambiguous(ClassBadResponse, fmt.Sprintf("push: HTTP %d with a PushResponse that sets no outcome", status))
}

// failed classifies a request that got no complete answer.
func failed(err, cause error, limit time.Duration) answer {
	switch {
	case errors.Is(cause, errTimeout):
		return ambiguous(ClassTimeout, fmt.Sprintf("push: timeout after %s", limit))
	case errors.Is(cause, ErrCanceled):
		// Aborted for an operator's cancel with no answer: as a worker's
		// stream closing, it leaves the task CANCELED (Decision.Canceled).
		return answer{class: ClassAborted, outcome: broker.OutcomeReleased}
	case cause != nil:
		return ambiguous(ClassAborted, "push: "+cause.Error())
	}
	msg := err.Error()
	// The client's error repeats the method and URL: what failed is the rest.
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) && ue.Unwrap() != nil {
		msg = ue.Unwrap().Error()
	}
	return ambiguous(ClassConnection, "push: "+wire.TruncateUTF8(msg, 512))
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(h string, at time.Time) (time.Duration, bool) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, false
	}
	var d time.Duration
	if n, err := strconv.ParseInt(h, 10, 64); err == nil {
		if n < 0 {
			return 0, false
		}
		d = time.Duration(min(n, int64(MaxRetryAfter/time.Second))) * time.Second
	} else if t, err := http.ParseTime(h); err == nil {
		d = t.Sub(at)
	} else {
		return 0, false
	}
	return min(max(d, 0), MaxRetryAfter), true
}
