package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strings"

	"connectrpc.com/connect"
)

// authInterceptor checks the bearer token on every unary call and once at
// the opening of every stream. Tokens are compared as SHA-256 digests in
// constant time, so neither their content nor their length leaks through
// timing.
type authInterceptor struct {
	digest [32]byte
}

func newAuthInterceptor(token string) *authInterceptor {
	return &authInterceptor{digest: sha256.Sum256([]byte(token))}
}

func (a *authInterceptor) check(h http.Header) error {
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
	if subtle.ConstantTimeCompare(d[:], a.digest[:]) != 1 {
		return connect.NewError(connect.CodeUnauthenticated, errors.New("invalid bearer token"))
	}
	return nil
}

// WrapUnary checks the token before the handler runs.
func (a *authInterceptor) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		if err := a.check(req.Header()); err != nil {
			return nil, err
		}
		return next(ctx, req)
	}
}

// WrapStreamingClient leaves client streams alone; this is a server interceptor.
func (a *authInterceptor) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

// WrapStreamingHandler checks the token once, at stream open.
func (a *authInterceptor) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		if err := a.check(conn.RequestHeader()); err != nil {
			return err
		}
		return next(ctx, conn)
	}
}
