package bolt

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"

	"github.com/conveyor-dev/conveyor/broker"
	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// schemaVersion is written to the meta bucket when a file is created. A
// release that changes the layout bumps it and migrates older files on open.
const schemaVersion = 1

// Bucket names. Every key that names a task is its 16-byte binary ULID, so
// each bucket iterates in id (and so roughly enqueue-time) order.
var (
	bucketMeta   = []byte("meta")   // "schema" → uint64 version
	bucketTasks  = []byte("tasks")  // id → TaskSpec (immutable)
	bucketLive   = []byte("live")   // id → TaskStatus of a non-terminal task
	bucketDone   = []byte("done")   // id → TaskStatus of a terminal task
	bucketPurge  = []byte("purge")  // purge_at (8 bytes, big-endian) ‖ id → empty
	bucketQueues = []byte("queues") // name → QueueRecord
	keySchema    = []byte("schema")
)

// key is a task id in binary form.
type key = ulid.ULID

func parseKey(id string) (key, error) {
	k, err := ulid.ParseStrict(id)
	if err != nil {
		return key{}, fmt.Errorf("task id %q: %w", id, broker.ErrNotFound)
	}
	return k, nil
}

func purgeKey(at int64, k key) []byte {
	b := make([]byte, 8+len(k))
	binary.BigEndian.PutUint64(b, uint64(at))
	copy(b[8:], k[:])
	return b
}

// nanos is t in Unix nanoseconds, 0 for the zero time. Times beyond what
// int64 nanoseconds hold (before 1678, after 2262) saturate at the ends
// of the range: a far-future time stays far in the future and a
// long-past one stays past, instead of wrapping around.
func nanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.After(maxNanosTime):
		return math.MaxInt64
	case t.Before(minNanosTime):
		return math.MinInt64 + 1
	}
	return t.UnixNano()
}

var (
	maxNanosTime = time.Unix(0, math.MaxInt64)
	minNanosTime = time.Unix(0, math.MinInt64+1)
)

// satAdd is n + d in nanoseconds, saturating instead of overflowing.
func satAdd(n int64, d time.Duration) int64 {
	switch {
	case d > 0 && n > math.MaxInt64-int64(d):
		return math.MaxInt64
	case d < 0 && n < math.MinInt64+1-int64(d):
		return math.MinInt64 + 1
	}
	return n + int64(d)
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// isWaiting reports whether a task in state s waits to run (and so can expire).
func isWaiting(s broker.State) bool {
	switch s {
	case conveyorv1.TaskState_TASK_STATE_SCHEDULED, conveyorv1.TaskState_TASK_STATE_PENDING,
		conveyorv1.TaskState_TASK_STATE_RETRY, conveyorv1.TaskState_TASK_STATE_AGGREGATING,
		conveyorv1.TaskState_TASK_STATE_BLOCKED:
		return true
	}
	return false
}

func marshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		// Marshalling a well-formed generated message cannot fail.
		panic(fmt.Sprintf("marshal %T: %v", m, err))
	}
	return b
}

// taskFrom assembles a broker.Task from its stored records; either may be nil.
func taskFrom(k key, spec *storagev1.TaskSpec, st *storagev1.TaskStatus) *broker.Task {
	t := &broker.Task{ID: k.String()}
	if spec != nil {
		t.Queue = spec.GetQueue()
		t.Type = spec.GetType()
		t.Payload = spec.GetPayload()
		t.ContentType = spec.GetContentType()
		t.Metadata = spec.GetMetadata()
		t.Options = spec.GetOptions()
		t.Deadline = deadlineOf(spec.GetOptions())
	}
	if st != nil {
		t.State = st.GetState()
		if t.Queue == "" {
			t.Queue = st.GetQueue()
		}
		t.Priority = st.GetPriority()
		t.Retried = st.GetRetried()
		t.MaxRetry = st.GetMaxRetry()
		t.LastError = st.GetLastError()
		t.EnqueuedAt = fromNanos(st.GetEnqueuedAt())
		t.NextProcessAt = fromNanos(st.GetNextProcessAt())
		t.StartedAt = fromNanos(st.GetStartedAt())
		t.CompletedAt = fromNanos(st.GetCompletedAt())
		t.ExpiresAt = fromNanos(st.GetExpiresAt())
		t.Result = st.GetResult()
		t.ProgressPercent = st.GetProgressPercent()
		t.ProgressMessage = st.GetProgressMessage()
		t.UniqueKey = st.GetUniqueKey()
	}
	return t
}
