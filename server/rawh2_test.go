package server_test

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// rawH2 is an HTTP/2 client written frame by frame. The tests that flood
// the server need what no real client does: connections that send the
// preface and nothing more, and streams that are opened and then left
// alone. It costs the test process little per connection, so what a
// measurement sees is the server's cost.
type rawH2 struct {
	conn net.Conn
	host string
	next uint32 // the next stream id (odd, client-initiated)

	wmu sync.Mutex // serializes writes

	// With reading on: gone is closed when the server closed the
	// connection; streams records what each stream received.
	gone    chan struct{}
	mu      sync.Mutex
	streams map[uint32]*rawStream
}

// rawStream is what the server sent on one stream.
type rawStream struct {
	data  bool // a DATA frame with a payload: a message, or its start
	ended bool // END_STREAM or RST_STREAM: the call is over
}

const h2RSTStream = 0x3

// dialRawH2 opens a connection to addr and sends the HTTP/2 preface and an
// empty SETTINGS frame (without which the server gives up within 2 s).
// With read, it reads the server's frames in the background: it
// acknowledges SETTINGS and PINGs, and records each stream's frames.
func dialRawH2(t testing.TB, addr string, read bool) *rawH2 {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	h := &rawH2{conn: c, next: 1, host: addr, gone: make(chan struct{}), streams: map[uint32]*rawStream{}}
	h.write(t, append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), h2Frame(h2Settings, 0, 0, nil)...))
	if read {
		go h.read()
	}
	return h
}

func (h *rawH2) read() {
	defer close(h.gone)
	hdr := make([]byte, 9)
	for {
		if _, err := io.ReadFull(h.conn, hdr); err != nil {
			return
		}
		payload := make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))
		if _, err := io.ReadFull(h.conn, payload); err != nil {
			return
		}
		typ, flags, id := hdr[3], hdr[4], binary.BigEndian.Uint32(hdr[5:])&0x7fffffff
		switch {
		case typ == h2Settings && flags&h2Ack == 0:
			_ = h.writeFrame(h2Settings, h2Ack, 0, nil)
		case typ == h2Ping && flags&h2Ack == 0:
			_ = h.writeFrame(h2Ping, h2Ack, 0, payload)
		}
		if id == 0 {
			continue
		}
		h.mu.Lock()
		st := h.streams[id]
		if st == nil {
			st = &rawStream{}
			h.streams[id] = st
		}
		if typ == h2Data && len(payload) > 0 {
			st.data = true
		}
		if (typ == h2Data || typ == h2Headers) && flags&h2EndStream != 0 || typ == h2RSTStream {
			st.ended = true
		}
		h.mu.Unlock()
	}
}

// stream is what stream id has received so far.
func (h *rawH2) stream(id uint32) rawStream {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st := h.streams[id]; st != nil {
		return *st
	}
	return rawStream{}
}

// isGone reports whether the server has closed the connection.
func (h *rawH2) isGone() bool {
	select {
	case <-h.gone:
		return true
	default:
		return false
	}
}

// grpcCall opens a stream that calls a gRPC method with an empty message
// and, if end, ends the request there; without end, the request body never
// finishes (half a message is sent). It returns the stream id.
func (h *rawH2) grpcCall(t testing.TB, path string, end bool) uint32 {
	t.Helper()
	h.wmu.Lock()
	id := h.next
	h.next += 2
	h.wmu.Unlock()
	var block []byte
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path},
		{":authority", h.host}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		block = append(block, hpackLiteral(kv[0], kv[1])...)
	}
	frames := h2Frame(h2Headers, h2EndHdrs, id, block)
	if end {
		frames = append(frames, h2Frame(h2Data, h2EndStream, id, []byte{0, 0, 0, 0, 0})...)
	} else {
		frames = append(frames, h2Frame(h2Data, 0, id, []byte{0, 0, 0})...)
	}
	h.write(t, frames)
	return id
}

func (h *rawH2) write(t testing.TB, b []byte) {
	t.Helper()
	h.wmu.Lock()
	defer h.wmu.Unlock()
	_ = h.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := h.conn.Write(b); err != nil {
		t.Fatalf("write to %s: %v", h.host, err)
	}
}

func (h *rawH2) writeFrame(typ, flags byte, stream uint32, payload []byte) error {
	h.wmu.Lock()
	defer h.wmu.Unlock()
	_, err := h.conn.Write(h2Frame(typ, flags, stream, payload))
	return err
}

// h2Frame encodes one frame.
func h2Frame(typ, flags byte, stream uint32, payload []byte) []byte {
	b := make([]byte, 9, 9+len(payload))
	b[0], b[1], b[2] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	b[3], b[4] = typ, flags
	binary.BigEndian.PutUint32(b[5:], stream)
	return append(b, payload...)
}
