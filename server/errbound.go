package server

import (
	"context"
	"errors"
	"unicode/utf8"

	"connectrpc.com/connect"
)

// maxErrorMessageBytes bounds the message of every error the services
// answer with. In gRPC and gRPC-Web the message travels in a header
// (grpc-message), and clients refuse large headers: Go's fails the whole
// connection with COMPRESSION_ERROR past 10 MB, grpc-go's refuses one past
// 16 KiB. A message that quoted a client's string of megabytes (an id, a
// queue name, a page token) would reach its caller as a broken connection,
// a transient error, instead of the error it is.
const maxErrorMessageBytes = 1 << 10

// Of a message cut to fit, the start names the field and the end says what
// is wrong with it; the middle, the client's own long string, goes.
const (
	errorHeadBytes = 640
	errorTailBytes = 256
)

// boundMessage is msg if it fits in maxErrorMessageBytes, else its start
// and its end, cut at UTF-8 boundaries, around a note of how much went.
func boundMessage(msg string) string {
	if len(msg) <= maxErrorMessageBytes {
		return msg
	}
	head := errorHeadBytes
	for head > 0 && !utf8.RuneStart(msg[head]) {
		head--
	}
	tail := len(msg) - errorTailBytes
	for tail < len(msg) && !utf8.RuneStart(msg[tail]) {
		tail++
	}
	return msg[:head] + " … [" + itoa(tail-head) + " bytes cut] … " + msg[tail:]
}

// boundError is err with its message bounded, its code, details and
// metadata kept; err itself when its message fits.
func boundError(err error) error {
	if err == nil || len(err.Error()) <= maxErrorMessageBytes {
		return err
	}
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return connect.NewError(connect.CodeOf(err), errors.New(boundMessage(err.Error())))
	}
	out := connect.NewError(ce.Code(), errors.New(boundMessage(ce.Message())))
	for _, d := range ce.Details() {
		out.AddDetail(d)
	}
	for k, v := range ce.Meta() {
		out.Meta()[k] = v
	}
	return out
}

// boundErrors is the handler interceptor that bounds every error message
// an RPC answers with (see maxErrorMessageBytes).
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
