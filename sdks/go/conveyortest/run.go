package conveyortest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/encoding/protojson"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// Outcome is how an attempt ended, as the worker reports it to the server
// (see conveyor.Handler).
type Outcome int

// The outcomes of an attempt.
const (
	// OutcomeSuccess: the handler returned nil; the task completes with
	// its result.
	OutcomeSuccess Outcome = iota + 1
	// OutcomeRetry: the handler returned an error (or panicked, or its
	// result was too large); the task is retried with backoff, or
	// archived once its retries are spent.
	OutcomeRetry
	// OutcomeSkipRetry: the handler returned an error matching
	// conveyor.ErrSkipRetry; the task is archived at once.
	OutcomeSkipRetry
	// OutcomeReleased: the task was given back unpenalized, as a draining
	// worker gives back what it abandons.
	OutcomeReleased
)

// String names the outcome as the protocol does, such as "SKIP_RETRY".
func (o Outcome) String() string {
	switch o {
	case OutcomeSuccess:
		return "SUCCESS"
	case OutcomeRetry:
		return "RETRY"
	case OutcomeSkipRetry:
		return "SKIP_RETRY"
	case OutcomeReleased:
		return "RELEASED"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Result is the outcome of one attempt run by RunTask, as the worker
// would report it.
type Result struct {
	// Outcome is how the attempt ended.
	Outcome Outcome
	// Error is the error text the task would keep as its last error
	// (cut to conveyor.MaxErrorMessageBytes); empty on success. A panic
	// reads "panic: " and the panic's value.
	Error string
	// Result is the bytes the handler gave Delivery.SetResult, kept on
	// success only.
	Result []byte
}

// RunOption configures RunTask and RunWorkerTask.
type RunOption interface {
	apply(*runConfig)
}

type runConfig struct {
	ctx     context.Context
	retried int
}

type runOptionFunc func(*runConfig)

func (f runOptionFunc) apply(c *runConfig) { f(c) }

// WithContext sets the context the handler's context derives from, for
// its values or to cancel it. Defaults to t.Context().
func WithContext(ctx context.Context) RunOption {
	return runOptionFunc(func(c *runConfig) { c.ctx = ctx })
}

// WithRetried sets Delivery.Retried, the failed attempts before this one,
// to test a handler that behaves differently on a late attempt. Defaults
// to 0, the first attempt.
func WithRetried(n int) RunOption {
	return runOptionFunc(func(c *runConfig) { c.retried = n })
}

// RunTask runs h on task once, synchronously and without a server, and
// returns the attempt's outcome as a Worker would report it. It is
// RunWorkerTask with a Worker that has h as its only handler, for task's
// type. Build task with conveyor.NewTask, NewJSONTask or NewKindTask; its
// options reach the handler as they would from a server (Delivery.Options,
// Queue, Metadata, and a Timeout or Deadline bounding the handler's
// context).
func RunTask(t testing.TB, h conveyor.Handler, task *conveyor.Task, opts ...RunOption) Result {
	t.Helper()
	w, err := conveyor.NewPushWorker()
	if err != nil {
		t.Fatalf("conveyortest: RunTask: %v", err)
	}
	if h == nil || task == nil || task.Proto().GetType() == "" {
		t.Fatalf("conveyortest: RunTask needs a handler and a task with a type")
	}
	w.Handle(task.Proto().GetType(), h)
	return RunWorkerTask(t, w, task, opts...)
}

// RunWorkerTask runs task once on w's handler for its type (a batch
// handler gets it as a batch of one), wrapped in w's middleware,
// synchronously and without a server, and returns the attempt's outcome.
// w may be a Worker made by NewWorker (it is not Run: no session is
// opened) or by NewPushWorker, with its handlers registered; a type with
// no handler gives RETRY with conveyor.ErrNoHandler's text.
//
// The task runs as a push endpoint runs it (Worker.PushHandler), the path
// that shares the session's handlers, middleware and outcome rules: nil is
// SUCCESS with the SetResult bytes, SkipRetry is SKIP_RETRY, any other
// error or a panic is RETRY, a result over conveyor.MaxResultBytes is
// RETRY. As on that path, Delivery.Progress does nothing. Delivery.ID is
// task's TaskID, or a new ULID; Queue defaults to "default" and
// ContentType to application/json, as the server's do.
//
// RunWorkerTask refuses an AtMostOnce task: that path never runs one. A
// handler sees only Delivery.Options.AtMostOnce of it, so test it with the
// option left off.
func RunWorkerTask(t testing.TB, w *conveyor.Worker, task *conveyor.Task, opts ...RunOption) Result {
	t.Helper()
	cfg := runConfig{ctx: t.Context()}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if w == nil || task == nil {
		t.Fatalf("conveyortest: RunWorkerTask needs a worker and a task")
	}
	req := pushRequest(task.Proto(), cfg.retried)
	if req.GetTask().GetOptions().GetAtMostOnce() {
		t.Fatalf("conveyortest: RunWorkerTask does not run an AtMostOnce task (it runs the handler as a push endpoint does, " +
			"and those never run one); test the handler with the option left off")
	}
	ph, err := w.PushHandler(conveyor.WithPushDevelopmentMode())
	if err != nil {
		t.Fatalf("conveyortest: %v", err)
	}
	body, err := protojson.Marshal(req)
	if err != nil {
		t.Fatalf("conveyortest: encode the task: %v", err)
	}
	rec := httptest.NewRecorder()
	ph.ServeHTTP(rec, httptest.NewRequestWithContext(cfg.ctx, http.MethodPost, "/", bytes.NewReader(body)))
	return pushResult(t, rec.Result())
}

// pushRequest is the request a server would push for a task enqueued as
// req, on its attempt after retried failed ones.
func pushRequest(req *conveyorv1.EnqueueRequest, retried int) *conveyorv1.PushRequest {
	env := &conveyorv1.TaskEnvelope{
		Id:          req.GetTaskId(),
		Queue:       req.GetQueue(),
		Type:        req.GetType(),
		Payload:     req.GetPayload(),
		ContentType: req.GetContentType(),
		Metadata:    req.GetMetadata(),
		Options:     req.GetOptions(),
		Retried:     int32(min(max(retried, 0), math.MaxInt32)),
		AttemptId:   ulid.Make().String(),
	}
	// The server's defaults for what the producer left unset.
	if env.Id == "" {
		env.Id = ulid.Make().String()
	}
	if env.Queue == "" {
		env.Queue = "default"
	}
	if env.ContentType == "" {
		env.ContentType = "application/json"
	}
	return &conveyorv1.PushRequest{Task: env, AttemptId: env.GetAttemptId()}
}

// pushResult decodes the push handler's answer.
func pushResult(t testing.TB, res *http.Response) Result {
	t.Helper()
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		t.Fatalf("conveyortest: read the handler's answer: %v", err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("conveyortest: the task was refused before its handler ran (%s): %s", res.Status, body)
	}
	var pr conveyorv1.PushResponse
	if err := protojson.Unmarshal(body, &pr); err != nil {
		t.Fatalf("conveyortest: decode the handler's answer: %v", err)
	}
	return Result{Outcome: outcomeOf(pr.GetOutcome()), Error: pr.GetErrorMsg(), Result: pr.GetResult()}
}

func outcomeOf(o conveyorv1.TaskOutcome) Outcome {
	switch o {
	case conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS:
		return OutcomeSuccess
	case conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY:
		return OutcomeRetry
	case conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY:
		return OutcomeSkipRetry
	case conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED:
		return OutcomeReleased
	}
	return Outcome(0)
}
