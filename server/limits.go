package server

import (
	"strconv"
	"time"

	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// Limits on what clients may send, the services and the worker sessions
// alike (server/internal/wire holds them, for both). docs/protocol.md
// lists them in one table, with what exceeding each gets.
const (
	// MaxPayloadBytes bounds one task payload (1 MiB), as the protocol says.
	MaxPayloadBytes = wire.MaxPayloadBytes
	// MaxBatchItems bounds EnqueueBatch, EnqueueTx and the batch actions.
	MaxBatchItems = wire.MaxBatchItems
	// MaxRequestBytes bounds one request message (32 MiB), and one worker
	// frame; a larger one fails with resource_exhausted. One item with a
	// payload of MaxPayloadBytes always fits.
	MaxRequestBytes = wire.MaxRequestBytes
	// MaxNameBytes bounds queue names, task types, content types, unique,
	// group and concurrency keys and cron ids.
	MaxNameBytes = wire.MaxNameBytes
	// MaxMetadataEntries and MaxMetadataBytes bound a task's metadata (the
	// bytes of its keys and values together).
	MaxMetadataEntries = wire.MaxMetadataEntries
	MaxMetadataBytes   = wire.MaxMetadataBytes
	// MaxDependencies bounds one task's depends_on list.
	MaxDependencies = wire.MaxDependencies
	// MaxResultBytes bounds the result bytes of a Result; a larger result
	// fails its attempt (the task is retried per its policy).
	MaxResultBytes = wire.MaxResultBytes
	// MaxErrorMessageBytes bounds a Result's error_msg; longer messages are
	// truncated.
	MaxErrorMessageBytes = wire.MaxErrorMessageBytes
	// MaxProgressMessageBytes bounds a Progress message; longer messages
	// are truncated.
	MaxProgressMessageBytes = wire.MaxProgressMessageBytes
	// MaxHeartbeatIDs bounds the ids one Heartbeat lists.
	MaxHeartbeatIDs = wire.MaxHeartbeatIDs
	// MaxHelloQueues, MaxHelloLabels and MaxHelloBatchTypes bound a Hello's
	// maps and lists; MaxLabelBytes bounds each label key and value, and
	// sdk_version and min_server_version.
	MaxHelloQueues     = wire.MaxHelloQueues
	MaxHelloLabels     = wire.MaxHelloLabels
	MaxHelloBatchTypes = wire.MaxHelloBatchTypes
	MaxLabelBytes      = wire.MaxLabelBytes
	// MaxGroupSize bounds a group policy's max_size (one BatchDispatch).
	MaxGroupSize = wire.MaxGroupSize
	// MaxGroupDelay bounds a group policy's max_delay and grace_period.
	MaxGroupDelay = wire.MaxGroupDelay
	// MaxQueueLimit bounds concurrency_limit, max_active, and a rate's
	// per_second and burst.
	MaxQueueLimit = wire.MaxQueueLimit
	// MaxQueueWaiting bounds a queue's max_waiting: a billion tasks, past
	// what one server holds, so that a typo does not read as a bound
	// (and a sum of the counts with it cannot overflow).
	MaxQueueWaiting = wire.MaxQueueWaiting
)

// healthMaxBytes bounds a health check's request (a service name), which
// needs no token: 4 KiB, after decompression too.
const healthMaxBytes = 4 << 10

// Bounds on what a client can hold open: connections, streams and request
// bodies. They matter most for a client without the token, which can
// reach the health service and little else, but they hold for every
// client. docs/protocol.md lists them with the others.
const (
	// FirstRequestTimeout is how long a new connection may stay open
	// without carrying a request (a client that sent only the HTTP/2
	// preface, or nothing): past it, the server closes the connection.
	FirstRequestTimeout = 10 * time.Second
	// MaxUnprovenConns bounds, on a server with a token, the connections
	// open that have not yet carried a request with the valid token. A
	// connection beyond it closes the oldest of them, so the bound never
	// shuts a client out: a client with the token proves itself with its
	// first request, in a round trip.
	MaxUnprovenConns = 512
	// MaxHealthCallsPerConn bounds the health calls (Check and Watch) in
	// progress on one connection; one more fails with resource_exhausted.
	MaxHealthCallsPerConn = 4
	// MaxWatchStreams bounds the health Watch streams open on the server,
	// all connections together; one more fails with resource_exhausted.
	MaxWatchStreams = 1024
	// HealthBodyTimeout bounds how long a health call's request (at most
	// 4 KiB) may take to arrive, and RequestBodyTimeout the request of any
	// other unary call (up to MaxRequestBytes). A body still incomplete
	// then fails the call. A worker session's stream is long-lived by
	// design and has no such bound.
	HealthBodyTimeout  = 5 * time.Second
	RequestBodyTimeout = time.Minute
)

func itoa(n int) string { return strconv.Itoa(n) }
