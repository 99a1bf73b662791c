package conveyor

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// PushHandler returns an http.Handler that runs the Worker's handlers for
// the tasks a server pushes to it: the endpoint of a queue whose
// configuration names one (QueueConfig.push). The server POSTs each
// delivery as a signed PushRequest in proto3 JSON and takes the
// PushResponse of a 200 as the attempt's result. It serves the same
// handlers as a session (Handle, HandleFunc, HandleJSON, HandleBatch, a
// batch handler getting each delivery as a batch of one) wrapped in the
// same middleware (Use), and maps their returns to outcomes by the same
// rules (see Handler): nil is SUCCESS with the SetResult bytes, SkipRetry
// is SKIP_RETRY, any other error or a panic is RETRY, and a type with no
// handler is RETRY with ErrNoHandler's message. Register the handlers
// first: PushHandler refuses a Worker that has none. The server never
// pushes an at-most-once task (see AtMostOnce); one that comes all the
// same is answered RELEASED, unrun, its error saying push endpoints do
// not run such tasks.
//
// The handler's context ends at PushRequest.deadline (also
// Delivery.Deadline), when the server aborts the request, and when the
// client goes away. The deadline is a time on the server's clock, so the
// endpoint's clock should be set right (as a platform's are): one ahead
// of the server's shortens every handler by as much.
//
// Requests are verified before their body is parsed (Standard Webhooks):
// the webhook-signature must hold an HMAC-SHA256 of the request under one
// of the push secrets (WithPushSecrets, or else CONVEYOR_PUSH_SECRET), the
// webhook-timestamp must be within the tolerance of the endpoint's clock
// (WithPushTolerance, 5 minutes), and the webhook-id must not be one
// accepted before. With no secret, PushHandler returns an error unless
// WithPushDevelopmentMode allows unsigned requests. A request refused gets
// a plain-text answer naming what is wrong, with the status:
//
//   - 405 Method Not Allowed: not a POST.
//   - 413 Content Too Large: a body over MaxPushRequestBytes (8 MiB).
//   - 401 Unauthorized: a signature header missing, a timestamp that is
//     not Unix seconds or is stale or in the future past the tolerance, or
//     no signature that matches.
//   - 409 Conflict: a webhook-id already accepted (a replay).
//   - 400 Bad Request: a body that is not a PushRequest with a task, or
//     whose attempt_id is not the webhook-id.
//
// The server counts every answer but a 200 with an outcome as a failed
// attempt (RETRY). The handler answers 200 once it has run the task's
// handler, whatever its outcome.
//
// Push has no channel for progress: Delivery.Progress does nothing in a
// pushed task. The handler runs requests as they come; the server bounds
// them by the endpoint's concurrency. It never opens a session: a Worker
// made by NewPushWorker has no server address and serves push only. Stop it
// with http.Server.Shutdown, which lets running handlers finish; the
// Worker's Shutdown and Close do not affect it.
func (w *Worker) PushHandler(opts ...PushOption) (http.Handler, error) {
	cfg, keys, err := newPushConfig(opts, os.Getenv)
	if err != nil {
		return nil, err
	}
	w.mu.RLock()
	n := len(w.handlers) + len(w.batchHandlers)
	w.mu.RUnlock()
	if n == 0 {
		return nil, errors.New("conveyor: the worker has no handlers: register some with Handle before PushHandler")
	}
	v := &pushVerifier{keys: keys, dev: cfg.dev, tolerance: cfg.tolerance, replay: newReplayCache(pushReplayCapacity)}
	return &pushHandler{w: w, verify: v, now: time.Now}, nil
}

// pushHandler serves push requests with a Worker's handlers.
type pushHandler struct {
	w      *Worker
	verify *pushVerifier
	now    func() time.Time
}

func (h *pushHandler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	received := h.now()
	req, refusal := h.accept(rw, r, received)
	if refusal != nil {
		h.w.log.Warn("refused a push request", "status", refusal.status, "reason", refusal.msg, "remote", r.RemoteAddr)
		http.Error(rw, refusal.msg, refusal.status)
		return
	}
	body, err := protojson.Marshal(h.run(r.Context(), req, received))
	if err != nil { // cannot happen: run bounds every string to valid UTF-8
		http.Error(rw, "encode the PushResponse: "+err.Error(), http.StatusInternalServerError)
		return
	}
	rw.Header().Set("Content-Type", "application/json")
	rw.WriteHeader(http.StatusOK)
	_, _ = rw.Write(body) // a failure means the server is gone: it has counted the attempt failed
}

// accept verifies r, received at now, and decodes its PushRequest.
func (h *pushHandler) accept(rw http.ResponseWriter, r *http.Request, now time.Time) (*conveyorv1.PushRequest, *pushRefusal) {
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		return nil, refuse(http.StatusMethodNotAllowed, "method %s: a push endpoint takes POST only", r.Method)
	}
	if r.ContentLength > MaxPushRequestBytes {
		return nil, tooLarge()
	}
	wh, refusal := h.verify.checkHeaders(r.Header, now)
	if refusal != nil {
		return nil, refusal
	}
	body, refusal := readPushBody(rw, r)
	if refusal != nil {
		return nil, refusal
	}
	if wh != nil {
		if refusal := h.verify.checkSignature(wh, body, now); refusal != nil {
			return nil, refusal
		}
	}
	req := &conveyorv1.PushRequest{}
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(body, req); err != nil {
		return nil, refuse(http.StatusBadRequest, "the body is not a PushRequest in proto3 JSON: %v", err)
	}
	if req.GetTask().GetId() == "" {
		return nil, refuse(http.StatusBadRequest, "the PushRequest has no task (task.id is empty)")
	}
	if wh != nil && req.GetAttemptId() != wh.id {
		return nil, refuse(http.StatusBadRequest, "the PushRequest's attempt_id %q is not its webhook-id %q",
			truncateName(req.GetAttemptId()), truncateName(wh.id))
	}
	return req, nil
}

// readPushBody reads r's body, at most MaxPushRequestBytes of it.
func readPushBody(rw http.ResponseWriter, r *http.Request) ([]byte, *pushRefusal) {
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, MaxPushRequestBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, tooLarge()
	case err != nil:
		return nil, refuse(http.StatusBadRequest, "read the request body: %v", err)
	}
	return body, nil
}

func tooLarge() *pushRefusal {
	return refuse(http.StatusRequestEntityTooLarge, "the body is over the %d bytes (8 MiB) a push request may take",
		MaxPushRequestBytes)
}

// run runs the handler for req's task, received at received, with a
// context that ends at req's deadline or with ctx, and answers its outcome.
func (h *pushHandler) run(ctx context.Context, req *conveyorv1.PushRequest, received time.Time) *conveyorv1.PushResponse {
	if req.GetTask().GetOptions().GetAtMostOnce() {
		return h.refuseAtMostOnce(req)
	}
	d := newDelivery(req.GetTask())
	if d.AttemptID == "" {
		d.AttemptID = req.GetAttemptId()
	}
	d.deadline = d.Options.Deadline // the server's clock, taken as the endpoint's (see PushHandler)
	d.Deadline = timeOrZero(req.GetDeadline())
	if d.Deadline.IsZero() { // no server omits it; bound the task by its own options then, as a session does
		d.Deadline = d.attemptBound(received)
	}
	var b *DeliveryBatch
	if h.w.batchHandlerFor(d.Type) != nil {
		b = &DeliveryBatch{Tasks: []*Delivery{d}}
	}
	if !d.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Deadline)
		defer cancel()
	}
	var r *conveyorv1.Result
	if err := h.call(ctx, d, b); b != nil {
		r = memberResult(ctx, b, d, err)
	} else {
		r = resultFor(ctx, d, err)
	}
	boundResult(r)
	return &conveyorv1.PushResponse{Outcome: r.GetOutcome(), ErrorMsg: r.GetErrorMsg(), Result: r.GetResult()}
}

// errPushAtMostOnce is the error of a pushed at-most-once task.
const errPushAtMostOnce = "push endpoints do not run at-most-once tasks: " +
	"the start of such a task must be authorized over a worker session"

// refuseAtMostOnce gives back, unrun, an at-most-once task pushed to the
// endpoint. The server sends none (a push has no way to ask before it
// starts, and an answer lost on the way back would leave the task run or
// not, unknown); should one come all the same, RELEASED returns it to the
// queue with no retry counted, for a worker session to run.
func (h *pushHandler) refuseAtMostOnce(req *conveyorv1.PushRequest) *conveyorv1.PushResponse {
	h.w.log.Warn("released a pushed at-most-once task without running it", "task", req.GetTask().GetId(),
		"type", req.GetTask().GetType())
	return &conveyorv1.PushResponse{Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED, ErrorMsg: errPushAtMostOnce}
}

// call runs the handler on a goroutine of its own, so that one that ends
// by runtime.Goexit (as t.FailNow does) is answered as a session answers
// it, and returns its error.
func (h *pushHandler) call(ctx context.Context, d *Delivery, b *DeliveryBatch) error {
	done := make(chan error, 1)
	go func() {
		returned := false
		defer func() {
			if !returned {
				done <- errHandlerExited
			}
		}()
		err := h.w.runHandler(ctx, d, b)
		returned = true
		done <- err
	}()
	return <-done
}
