package conveyor

import (
	"errors"
	"testing"

	"connectrpc.com/connect"
)

// TestErrQueueFullRule: ErrQueueFull matches resource_exhausted with the
// protocol's "queue full: " mark only, not the other refusals of that
// code (an oversized request, too many queues).
func TestErrQueueFullRule(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		code connect.Code
		msg  string
		full bool
	}{
		{connect.CodeResourceExhausted, `queue full: queue "b" is at its max_waiting of 10 tasks (waited 5s for room)`, true},
		{connect.CodeResourceExhausted, "message size 40000000 is larger than configured max 33554432", false},
		{connect.CodeResourceExhausted, `resource exhausted: queue "q" would be new, and the server already knows 65535 queues`, false},
		{connect.CodeUnavailable, `queue full: queue "b" is at its max_waiting of 10 tasks`, false},
	} {
		err := error(&Error{err: connect.NewError(c.code, errors.New(c.msg))})
		if got := errors.Is(err, ErrQueueFull); got != c.full {
			t.Errorf("errors.Is(%s %q, ErrQueueFull) = %v, want %v", c.code, c.msg, got, c.full)
		}
	}
}
