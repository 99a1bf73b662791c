package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"connectrpc.com/connect"
)

// tokenGate requires the server's bearer token on every request it
// guards. It checks the request's headers before anything reads its body,
// so a caller without the token gets unauthenticated, never a decoding or
// size error, and cannot make the server read and decode up to
// MaxRequestBytes first. Tokens are compared as SHA-256 digests in
// constant time, so neither their content nor their length leaks through
// timing. A nil gate (a server without a token) lets everything through.
type tokenGate struct {
	digest [32]byte
	// rpcErrors writes a refusal in the caller's RPC protocol (Connect,
	// gRPC or gRPC-Web), as a handler's own error would be written.
	rpcErrors *connect.ErrorWriter
}

func newTokenGate(token string) *tokenGate {
	if token == "" {
		return nil
	}
	return &tokenGate{digest: sha256.Sum256([]byte(token)), rpcErrors: connect.NewErrorWriter()}
}

func (g *tokenGate) check(h http.Header) error {
	v := h.Get("Authorization")
	if v == "" {
		return connect.NewError(connect.CodeUnauthenticated,
			errors.New("missing bearer token: send the header Authorization: Bearer <token>"))
	}
	scheme, tok, ok := strings.Cut(v, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return connect.NewError(connect.CodeUnauthenticated,
			errors.New("malformed Authorization header: want Bearer <token>"))
	}
	d := sha256.Sum256([]byte(tok))
	if subtle.ConstantTimeCompare(d[:], g.digest[:]) != 1 {
		return connect.NewError(connect.CodeUnauthenticated, errors.New("invalid bearer token"))
	}
	return nil
}

// rpc guards an RPC handler: unary calls one by one, streams once, at
// their opening.
func (g *tokenGate) rpc(h http.Handler) http.Handler {
	if g == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := g.check(r.Header)
		switch {
		case err == nil:
			proveConn(r)
			h.ServeHTTP(w, r)
		case g.rpcErrors.IsSupported(r):
			_ = g.rpcErrors.Write(w, r, err)
		default: // not an RPC at all: answer as a plain path would
			refusePlain(w, err)
		}
	})
}

// plain guards a plain HTTP path (/metrics, /backup).
func (g *tokenGate) plain(h http.Handler) http.Handler {
	if g == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := g.check(r.Header); err != nil {
			refusePlain(w, err)
			return
		}
		proveConn(r)
		h.ServeHTTP(w, r)
	})
}

// proveConn records that r's connection carried the valid token: it no
// longer counts among the unproven connections (connGuard).
func proveConn(r *http.Request) {
	if c := connOf(r.Context()); c != nil {
		c.prove()
	}
}

func refusePlain(w http.ResponseWriter, err error) {
	w.Header().Set("WWW-Authenticate", "Bearer")
	var ce *connect.Error
	if errors.As(err, &ce) {
		http.Error(w, ce.Message(), http.StatusUnauthorized)
		return
	}
	http.Error(w, err.Error(), http.StatusUnauthorized)
}
