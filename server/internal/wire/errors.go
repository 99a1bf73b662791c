package wire

import (
	"context"
	"errors"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/broker"
)

// errStorageUnavailable is what a caller is told while the store cannot
// be reached: the call changed nothing and may be retried. It matches
// broker.ErrUnavailable.
var errStorageUnavailable error = storageUnavailable{}

type storageUnavailable struct{}

func (storageUnavailable) Error() string {
	return "the server cannot reach its storage right now; retry later"
}

func (storageUnavailable) Unwrap() error { return broker.ErrUnavailable }

// ConnectError maps a broker error to the protocol's error code. Messages
// of the broker's sentinel errors describe the caller's problem and are
// passed on; anything else is an internal failure: it is logged, and the
// caller gets a generic message that leaks nothing about the server.
func ConnectError(log *slog.Logger, err error) error {
	var ce *connect.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ce):
		return err
	case errors.Is(err, broker.ErrAlreadyExists):
		return connect.NewError(connect.CodeAlreadyExists, err)
	case errors.Is(err, broker.ErrNotFound):
		return connect.NewError(connect.CodeNotFound, err)
	case errors.Is(err, broker.ErrInvalidArgument):
		return connect.NewError(connect.CodeInvalidArgument, err)
	case errors.Is(err, broker.ErrInvalidState), errors.Is(err, broker.ErrLeaseLost):
		return connect.NewError(connect.CodeFailedPrecondition, err)
	case errors.Is(err, broker.ErrQueueFull), errors.Is(err, broker.ErrResourceExhausted):
		return connect.NewError(connect.CodeResourceExhausted, err)
	case errors.Is(err, broker.ErrClosed):
		return connect.NewError(connect.CodeUnavailable, errors.New("the server is shutting down"))
	case errors.Is(err, broker.ErrUnavailable):
		log.Warn("storage unavailable", "err", err)
		return connect.NewError(connect.CodeUnavailable, errStorageUnavailable)
	case errors.Is(err, context.Canceled):
		return connect.NewError(connect.CodeCanceled, err)
	case errors.Is(err, context.DeadlineExceeded):
		return connect.NewError(connect.CodeDeadlineExceeded, err)
	}
	log.Error("internal error", "err", err)
	return connect.NewError(connect.CodeInternal, errors.New("internal error; see the server log"))
}
