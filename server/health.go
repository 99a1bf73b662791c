package server

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
)

// watchPath is the path of the health service's Watch stream.
const watchPath = "/" + grpchealth.HealthV1ServiceName + "/Watch"

// watchCutGrace is how long a health Watch stream has, once shutdown
// begins, to send NOT_SERVING and end on its own before it is cut.
const watchCutGrace = time.Second

// health serves gRPC health checking (grpc.health.v1.Health: Check and
// Watch). It needs no token: probes from orchestrators carry no secrets,
// and the answer reveals nothing. So that anyone can ask costs little, a
// call's request is at most healthMaxBytes and must arrive within
// HealthBodyTimeout, a connection may have MaxHealthCallsPerConn calls in
// progress, and the server MaxWatchStreams Watch streams open.
//
// At shutdown (end) every status turns NOT_SERVING, and each Watch stream
// ends as soon as it has sent that status: Check, which the stream asks
// for the status it sends next, ends the stream's context when the answer
// is NOT_SERVING, and the stream's loop returns after the send. A stream
// still open watchCutGrace later is cut.
type health struct {
	// mu orders a change of the storage's health (setStorage) with the
	// shutdown's NOT_SERVING (end), which is final.
	mu      sync.Mutex
	checker *grpchealth.StaticChecker
	errors  *connect.ErrorWriter
	watches atomic.Int64
	ending  atomic.Bool
	cut     context.Context // canceled to cut the Watch streams still open
	cutNow  context.CancelFunc
	cutAt   *time.Timer
}

func newHealth(services ...string) *health {
	cut, cutNow := context.WithCancel(context.Background())
	return &health{
		checker: grpchealth.NewStaticChecker(services...),
		errors:  connect.NewErrorWriter(),
		cut:     cut, cutNow: cutNow,
	}
}

// handler returns the service's path and its handler, with its bounds.
func (h *health) handler() (string, http.Handler) {
	path, handler := grpchealth.NewHandler(h, connect.WithReadMaxBytes(healthMaxBytes))
	return path, h.limit(bodyTimeout(HealthBodyTimeout, handler))
}

// watchEndKey is the context key of a Watch stream's end function.
type watchEndKey struct{}

// Check implements grpchealth.Checker. Asked by a Watch stream during
// shutdown, an answer NOT_SERVING is that stream's last.
func (h *health) Check(ctx context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	res, err := h.checker.Check(ctx, req)
	if err == nil && res.Status == grpchealth.StatusNotServing && h.ending.Load() {
		if end, ok := ctx.Value(watchEndKey{}).(context.CancelFunc); ok {
			end()
		}
	}
	return res, err
}

// Watch implements grpchealth.Watcher.
func (h *health) Watch(ctx context.Context, req *grpchealth.CheckRequest, onChange func()) (func(), error) {
	return h.checker.Watch(ctx, req, onChange)
}

// limit enforces the bounds on calls in progress.
func (h *health) limit(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c := connOf(r.Context()); c != nil {
			if c.healthCalls.Add(1) > MaxHealthCallsPerConn {
				c.healthCalls.Add(-1)
				h.refuse(w, r, "this connection has "+itoa(MaxHealthCallsPerConn)+
					" health calls in progress, the most one connection may have; wait for one to end, or open another connection")
				return
			}
			defer c.healthCalls.Add(-1)
		}
		if r.URL.Path != watchPath {
			next.ServeHTTP(w, r)
			return
		}
		if h.watches.Add(1) > MaxWatchStreams {
			h.watches.Add(-1)
			h.refuse(w, r, "the server has "+itoa(MaxWatchStreams)+
				" health Watch streams open, its limit; try again later, or poll with Check")
			return
		}
		defer h.watches.Add(-1)
		ctx, end := context.WithCancel(r.Context())
		defer end()
		defer context.AfterFunc(h.cut, end)()
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, watchEndKey{}, end)))
	})
}

// refuse fails a call with resource_exhausted, in its RPC protocol.
func (h *health) refuse(w http.ResponseWriter, r *http.Request, msg string) {
	if h.errors.IsSupported(r) {
		_ = h.errors.Write(w, r, connect.NewError(connect.CodeResourceExhausted, errors.New(msg)))
		return
	}
	http.Error(w, msg, http.StatusTooManyRequests)
}

// end turns every status NOT_SERVING, which ends the Watch streams, and
// cuts those still open watchCutGrace later. It is the first step of
// shutdown.
func (h *health) end() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ending.Store(true)
	// "" is the server-wide status most probes ask for.
	for _, name := range append([]string{""}, servedServices...) {
		h.checker.SetStatus(name, grpchealth.StatusNotServing)
	}
	h.cutAt = time.AfterFunc(watchCutGrace, h.cutNow)
}

// close cuts whatever Watch stream is left; the HTTP server has stopped.
func (h *health) close() {
	if h.cutAt != nil {
		h.cutAt.Stop()
	}
	h.cutNow()
}

// setStorage reports every service SERVING or NOT_SERVING as the storage
// answers or not (a database that is down): a load balancer then sends
// producers elsewhere, and the Watch streams are told. Shutdown's
// NOT_SERVING is final.
func (h *health) setStorage(healthy bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ending.Load() {
		return
	}
	status := grpchealth.StatusServing
	if !healthy {
		status = grpchealth.StatusNotServing
	}
	for _, name := range append([]string{""}, servedServices...) {
		h.checker.SetStatus(name, status)
	}
}
