package conveyor

import (
	"io"
	"net/http"
	"runtime"
	"sync"
)

// coalesceLimit bounds how many bytes a coalescingBody holds before it
// stops reading ahead, so it never hides the stream's back-pressure.
const coalesceLimit = 1 << 20

// coalescingTransport wraps the request body of every streaming call in a
// coalescingBody. Go's HTTP/2 client writes and flushes one DATA frame per
// Read of the request body, and connect writes each message with its own
// Write, so without this every Result and Heartbeat of a busy worker costs
// a write syscall of its own.
type coalescingTransport struct {
	next http.RoundTripper
}

func (t coalescingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.ContentLength < 0 {
		req.Body = newCoalescingBody(req.Body)
	}
	return t.next.RoundTrip(req)
}

// sessionClient is hc with its transport wrapped in a coalescingTransport,
// and without its Timeout: http.Client.Timeout bounds a whole exchange,
// reading the response body included, and a session's stream lasts as long
// as the worker runs, so a Timeout would end every session after it
// (releasing the session's tasks) however healthy the connection.
func sessionClient(hc *http.Client) *http.Client {
	c := *hc
	c.Timeout = 0
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = coalescingTransport{next: next}
	return &c
}

// coalescingBody reads ahead from a request body into a buffer, so that a
// Read returns every message written since the last one: one DATA frame,
// one flush, however many messages.
type coalescingBody struct {
	src  io.ReadCloser
	mu   sync.Mutex
	cond sync.Cond
	buf  []byte
	err  error // the source's terminal error
	done bool  // Close was called
}

func newCoalescingBody(src io.ReadCloser) *coalescingBody {
	b := &coalescingBody{src: src}
	b.cond.L = &b.mu
	go b.pump()
	return b
}

// pump copies the source into the buffer until it ends.
func (b *coalescingBody) pump() {
	chunk := make([]byte, 32<<10)
	for {
		n, err := b.src.Read(chunk)
		b.mu.Lock()
		b.buf = append(b.buf, chunk[:n]...)
		if err != nil {
			b.err = err
		}
		b.cond.Broadcast()
		for len(b.buf) >= coalesceLimit && !b.done {
			b.cond.Wait()
		}
		stop := b.err != nil || b.done
		b.mu.Unlock()
		if stop {
			return
		}
	}
}

// Read returns everything buffered, waiting only when nothing is.
func (b *coalescingBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for len(b.buf) == 0 && b.err == nil && !b.done {
		b.cond.Wait()
	}
	if len(b.buf) > 0 && len(b.buf) < len(p) && b.err == nil && !b.done {
		// Give the goroutines that are about to write (other handlers
		// finishing, the session's writer) one turn to add to the buffer
		// before it leaves as a frame: a yield, not a timer, so an idle
		// worker's lone Result is not delayed.
		b.mu.Unlock()
		runtime.Gosched()
		b.mu.Lock()
	}
	if len(b.buf) > 0 {
		n := copy(p, b.buf)
		b.buf = b.buf[n:]
		if len(b.buf) == 0 {
			b.buf = b.buf[:0:0] // let a grown buffer go
		}
		b.cond.Broadcast()
		return n, nil
	}
	if b.done {
		return 0, io.ErrClosedPipe
	}
	return 0, b.err
}

// Close stops reading ahead and closes the source.
func (b *coalescingBody) Close() error {
	b.mu.Lock()
	b.done = true
	b.cond.Broadcast()
	b.mu.Unlock()
	return b.src.Close()
}
