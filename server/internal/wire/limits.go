package wire

import (
	"time"
	"unicode/utf8"
)

// Limits on what clients may send. docs/protocol.md lists them in one
// table, with what exceeding each gets.
const (
	// MaxPayloadBytes bounds one task payload (1 MiB), as the protocol says.
	MaxPayloadBytes = 1 << 20
	// MaxBatchItems bounds EnqueueBatch, EnqueueTx and the batch actions.
	MaxBatchItems = 1000
	// MaxRequestBytes bounds one request message (32 MiB), and one worker
	// frame; a larger one fails with resource_exhausted. One item with a
	// payload of MaxPayloadBytes always fits.
	MaxRequestBytes = 32 << 20
	// MaxNameBytes bounds queue names, task types, content types, unique,
	// group and concurrency keys and cron ids.
	MaxNameBytes = 1024
	// MaxMetadataEntries and MaxMetadataBytes bound a task's metadata (the
	// bytes of its keys and values together).
	MaxMetadataEntries = 64
	MaxMetadataBytes   = 64 << 10
	// MaxDependencies bounds one task's depends_on list.
	MaxDependencies = 1000
	// MaxResultBytes bounds the result bytes of a Result; a larger result
	// fails its attempt (the task is retried per its policy).
	MaxResultBytes = 1 << 20
	// MaxErrorMessageBytes bounds a Result's error_msg; longer messages are
	// truncated.
	MaxErrorMessageBytes = 16 << 10
	// MaxProgressMessageBytes bounds a Progress message; longer messages
	// are truncated.
	MaxProgressMessageBytes = 1 << 10
	// MaxHeartbeatIDs bounds the ids one Heartbeat lists.
	MaxHeartbeatIDs = 100_000
	// MaxHelloQueues, MaxHelloLabels and MaxHelloBatchTypes bound a Hello's
	// maps and lists; MaxLabelBytes bounds each label key and value, and
	// sdk_version and min_server_version.
	MaxHelloQueues     = 1000
	MaxHelloLabels     = 64
	MaxHelloBatchTypes = 1000
	MaxHelloTypes      = 1000 // Hello.types
	MaxLabelBytes      = 1024
	// MaxGroupSize bounds a group policy's max_size (one BatchDispatch).
	MaxGroupSize = 10_000
	// MaxGroupDelay bounds a group policy's max_delay and grace_period.
	MaxGroupDelay = 24 * time.Hour
	// MaxQueueLimit bounds concurrency_limit, max_active, and a rate's
	// per_second and burst.
	MaxQueueLimit = 1_000_000
	// MaxQueueWaiting bounds a queue's max_waiting: a billion tasks, past
	// what one server holds, so that a typo does not read as a bound
	// (and a sum of the counts with it cannot overflow).
	MaxQueueWaiting = 1_000_000_000
)

// truncatedSuffix marks a string cut short by TruncateUTF8.
const truncatedSuffix = " … [truncated]"

// TruncateUTF8 returns s if it fits in limit bytes, else its longest
// prefix that ends on a UTF-8 boundary and, with truncatedSuffix, fits.
func TruncateUTF8(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := max(limit-len(truncatedSuffix), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + truncatedSuffix
}
