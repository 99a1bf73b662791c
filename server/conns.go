package server

import (
	"container/list"
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// connGuard bounds what clients hold in connections:
//   - a connection that carries no request within FirstRequestTimeout of
//     opening is closed (a client that sent only the HTTP/2 preface would
//     otherwise keep it until the idle timeout);
//   - on a server with a token, at most MaxUnprovenConns connections may be
//     open that have not carried a request with the valid token. The one
//     beyond closes the oldest of them rather than being refused: a client
//     with the token proves itself with its first request, so it is never
//     the oldest for long, and a flood cannot lock it out.
//
// Proven connections are not bounded here: opening one takes the token.
type connGuard struct {
	// requireProof is set on a server with a token. Without one, every
	// client is trusted the same, and a connection is proven by its first
	// request.
	requireProof bool
	mu           sync.Mutex
	unproven     list.List // of *serverConn, oldest first
}

// admit starts tracking a new connection.
func (g *connGuard) admit(c *serverConn) {
	c.firstReq = time.AfterFunc(FirstRequestTimeout, c.expire)
	if !g.requireProof {
		return
	}
	var evict *serverConn
	g.mu.Lock()
	if g.unproven.Len() >= MaxUnprovenConns {
		oldest := g.unproven.Front()
		evict = oldest.Value.(*serverConn)
		g.unproven.Remove(oldest)
		evict.elem = nil
	}
	c.elem = g.unproven.PushBack(c)
	g.mu.Unlock()
	if evict != nil {
		_ = evict.Conn.Close() // the server's reader fails, and Closes it
	}
}

// forget stops counting c among the unproven connections.
func (g *connGuard) forget(c *serverConn) {
	g.mu.Lock()
	if c.elem != nil {
		g.unproven.Remove(c.elem)
		c.elem = nil
	}
	g.mu.Unlock()
}

// connKey is the context key of a request's *serverConn.
type connKey struct{}

// connContext is the http.Server's ConnContext: it makes the request's
// serverConn reachable from its context.
func connContext(ctx context.Context, c net.Conn) context.Context {
	for c != nil {
		if sc, ok := c.(*serverConn); ok {
			return context.WithValue(ctx, connKey{}, sc)
		}
		u, ok := c.(interface{ NetConn() net.Conn }) // a *tls.Conn
		if !ok {
			break
		}
		c = u.NetConn()
	}
	return ctx
}

// connOf is the connection a request came on, nil if unknown (a handler
// served some other way, as in a test).
func connOf(ctx context.Context) *serverConn {
	c, _ := ctx.Value(connKey{}).(*serverConn)
	return c
}

// trackRequests records on each request's connection that it carried one
// and, on a server without a token, that it is proven.
func (g *connGuard) trackRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c := connOf(r.Context()); c != nil {
			c.used()
			if !g.requireProof {
				c.prove()
			}
		}
		next.ServeHTTP(w, r)
	})
}
