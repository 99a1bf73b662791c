package server

import (
	"errors"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// errorText is the message of an error for a per-item result field,
// bounded as every error message is (wire.BoundMessage).
func errorText(err error) string {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return wire.BoundMessage(ce.Message())
	}
	return wire.BoundMessage(err.Error())
}
