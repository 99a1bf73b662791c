package sessions

import (
	"context"
	"net/http"
	"time"
)

// flushGate lets a session send a burst of frames in one write. connect
// flushes the response after every message it sends; on HTTP/2 each flush
// is a hand-off to the connection's writer goroutine and, usually, a write
// syscall. While the gate is held, flushes are remembered instead of done,
// and release does one flush for the whole burst.
//
// Only the session's send loop writes to the stream (and connect's final
// Close runs on the same goroutine), so the gate needs no locking.
type flushGate struct {
	http.ResponseWriter
	flusher http.Flusher
	held    bool
	pending bool
}

// Flush flushes now, or at release when the gate is held.
func (g *flushGate) Flush() {
	if g.held {
		g.pending = true
		return
	}
	g.flusher.Flush()
}

// Unwrap exposes the wrapped writer to http.ResponseController.
func (g *flushGate) Unwrap() http.ResponseWriter { return g.ResponseWriter }

func (g *flushGate) hold() {
	if g != nil {
		g.held = true
	}
}

func (g *flushGate) release() {
	if g == nil {
		return
	}
	g.held = false
	if g.pending {
		g.pending = false
		g.flusher.Flush()
	}
}

type flushGateKey struct{}

// WithFlushGate wraps the response writer of every request to h in a
// flushGate that a session finds in its context, so that it sends each
// burst of frames in one write. The server wraps the WorkerService handler
// in it; a session served without it flushes after every frame.
func WithFlushGate(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := w.(http.Flusher)
		if !ok {
			h.ServeHTTP(w, r)
			return
		}
		g := &flushGate{ResponseWriter: w, flusher: f}
		h.ServeHTTP(g, r.WithContext(context.WithValue(r.Context(), flushGateKey{}, g)))
	})
}

// flushGateFrom returns the request's flushGate, or nil.
func flushGateFrom(ctx context.Context) *flushGate {
	g, _ := ctx.Value(flushGateKey{}).(*flushGate)
	return g
}

// cutWrites makes a write that is blocked (the peer stopped reading and
// HTTP/2 flow control holds the stream) fail now, and every later one too.
func (g *flushGate) cutWrites() {
	if g == nil {
		return
	}
	_ = http.NewResponseController(g.ResponseWriter).SetWriteDeadline(time.Now())
}
