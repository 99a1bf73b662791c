package server

import (
	"bufio"
	"container/list"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// readBufferSize is the read buffer of each proven connection.
const readBufferSize = 32 << 10

// listener wraps every accepted connection in a serverConn, which the
// connGuard tracks from accept to close.
type listener struct {
	net.Listener
	guard *connGuard
}

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	sc := &serverConn{Conn: c, guard: l.guard}
	l.guard.admit(sc)
	return sc, nil
}

// serverConn is an accepted connection, with what the server bounds per
// connection.
//
// Its reads go through a buffer once the connection is proven. Go's
// HTTP/2 server reads each frame straight from the connection, a 9-byte
// header and then the payload: two read syscalls per frame, and a worker
// session sends one small frame per Result. With the buffer, one read
// takes in every frame that has arrived. A connection that has not proven
// itself (a client without the token, or one that has sent nothing yet)
// reads without it, so that holding one open costs the server 32 KiB less.
type serverConn struct {
	net.Conn
	guard *connGuard
	// r is the read buffer, nil until the connection is proven. Only the
	// connection's reader touches it: the HTTP servers never read one
	// connection from two goroutines at once.
	r *bufio.Reader

	// state is fresh until the connection carries its first request
	// (used) or FirstRequestTimeout passes first (expired).
	state    atomic.Int32
	firstReq *time.Timer
	proven   atomic.Bool
	// elem is the connection's place in guard's list of unproven
	// connections, nil when not in it. Guarded by guard.mu.
	elem *list.Element
	// healthCalls counts the health calls in progress on the connection.
	healthCalls atomic.Int32
	closeOnce   sync.Once
}

// The states of serverConn.state.
const (
	connFresh int32 = iota
	connUsed
	connExpired
)

func (c *serverConn) Read(p []byte) (int, error) {
	if c.r == nil {
		if !c.proven.Load() {
			return c.Conn.Read(p)
		}
		c.r = bufio.NewReaderSize(c.Conn, readBufferSize)
	}
	return c.r.Read(p)
}

// Close closes the connection and forgets it.
func (c *serverConn) Close() error {
	c.closeOnce.Do(func() {
		c.firstReq.Stop()
		c.guard.forget(c)
	})
	return c.Conn.Close()
}

// used records that the connection carried a request.
func (c *serverConn) used() {
	if c.state.CompareAndSwap(connFresh, connUsed) {
		c.firstReq.Stop()
	}
}

// expire closes the connection if it has carried no request yet.
func (c *serverConn) expire() {
	if c.state.CompareAndSwap(connFresh, connExpired) {
		_ = c.Conn.Close() // the server's reader fails, and Closes c
	}
}

// prove records that the connection carried a request with the valid
// token (or, on a server without one, any request).
func (c *serverConn) prove() {
	if !c.proven.Load() && !c.proven.Swap(true) {
		c.guard.forget(c)
	}
}

// NetConn returns the wrapped connection (for code that unwraps conns).
func (c *serverConn) NetConn() net.Conn { return c.Conn }
