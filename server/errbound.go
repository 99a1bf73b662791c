package server

import (
	"context"
	"errors"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// boundError is err with its message bounded, its code, details and
// metadata kept; err itself when its message fits.
func boundError(err error) error {
	if err == nil || len(err.Error()) <= wire.MaxErrorTextBytes {
		return err
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return connect.NewError(connect.CodeOf(err), errors.New(wire.BoundMessage(err.Error())))
	}
	out := connect.NewError(ce.Code(), errors.New(wire.BoundMessage(ce.Message())))
	for _, d := range ce.Details() {
		out.AddDetail(d)
	}
	for k, v := range ce.Meta() {
		out.Meta()[k] = v
	}
	return out
}

// boundErrors is the handler interceptor that bounds every error message
// an RPC answers with (see wire.MaxErrorTextBytes).
type boundErrors struct{}

func (boundErrors) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		res, err := next(ctx, req)
		return res, boundError(err)
	}
}

func (boundErrors) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (boundErrors) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return func(ctx context.Context, conn connect.StreamingHandlerConn) error {
		return boundError(next(ctx, conn))
	}
}
