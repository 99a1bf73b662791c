package server

import (
	"bufio"
	"net"
)

// readBufferSize is the read buffer of each accepted connection.
const readBufferSize = 32 << 10

// bufferedListener gives every accepted connection a read buffer. Go's
// HTTP/2 server reads each frame straight from the connection, a 9-byte
// header and then the payload: two read syscalls per frame, and a worker
// session sends one small frame per Result. With the buffer, one read
// takes in every frame that has arrived.
type bufferedListener struct {
	net.Listener
}

func (l bufferedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &bufferedConn{Conn: c, r: bufio.NewReaderSize(c, readBufferSize)}, nil
}

// bufferedConn is a net.Conn whose reads go through a bufio.Reader.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// NetConn returns the wrapped connection (for code that unwraps conns).
func (c *bufferedConn) NetConn() net.Conn { return c.Conn }
