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
)

// schemaVersion is written to the meta bucket when a file is created. A
// release that changes the layout bumps it and migrates older files on
// open (migrate.go).
const schemaVersion = 2

// Bucket names. Every key that names a task is its 16-byte binary ULID, so
// each bucket iterates in id (and so roughly enqueue-time) order.
var (
	bucketMeta   = []byte("meta")   // "schema" → uint64 version
	bucketTasks  = []byte("tasks")  // id → TaskSpec (immutable)
	bucketLive   = []byte("live")   // id → TaskStatus of a non-terminal task
	bucketDone   = []byte("done")   // id → TaskStatus of a terminal task
	bucketPurge  = []byte("purge")  // purge_at (8 bytes, big-endian) ‖ id → empty, for tasks with their own retention
	bucketEnded  = []byte("ended")  // class (1 byte) ‖ completed_at (8 bytes) ‖ id → empty, for the others
	bucketQueues = []byte("queues") // name → QueueRecord
	bucketIndex  = []byte("index")  // queue ‖ state ‖ type ‖ id → empty (see indexKey): the listing index
	// dependency id ‖ dependent id → empty: who depends on a task, for display
	bucketDependents = []byte("dependents")
	keySchema        = []byte("schema")
)

// allBuckets are the buckets every file holds, created with it.
var allBuckets = [][]byte{bucketMeta, bucketTasks, bucketLive, bucketDone, bucketPurge, bucketEnded, bucketQueues,
	bucketIndex, bucketDependents, bucketCron, bucketReleases, bucketHistory}

// Retention classes of terminal tasks without a retention of their own:
// the purger gives a horizon per class.
const (
	classCompleted = iota // COMPLETED
	classArchived         // ARCHIVED and CANCELED
	numClasses
)

func classOf(s broker.State) int {
	if s == broker.StateCompleted {
		return classCompleted
	}
	return classArchived
}

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

func endedKey(class int, at int64, k key) []byte {
	b := make([]byte, 1+8+len(k))
	b[0] = byte(class)
	binary.BigEndian.PutUint64(b[1:], uint64(at))
	copy(b[9:], k[:])
	return b
}

// indexKey is a task's key in the listing index: its queue, state and
// type, each length-prefixed so that any bytes may appear in them, then its
// id. A queue's tasks in one state are one contiguous range, by type, then
// by id.
func indexKey(queue string, state broker.State, typ string, k key) []byte {
	b := indexPrefix(queue, state, typ)
	return append(b, k[:]...)
}

// indexPrefix is the common prefix of a (queue, state) range, or of a
// (queue, state, type) range when typ is not nil.
func indexPrefix(queue string, state broker.State, typ ...string) []byte {
	b := make([]byte, 0, 2+len(queue)+1+64)
	b = binary.BigEndian.AppendUint16(b, uint16(len(queue)))
	b = append(b, queue...)
	b = append(b, byte(state))
	for _, t := range typ {
		b = binary.BigEndian.AppendUint16(b, uint16(len(t)))
		b = append(b, t...)
	}
	return b
}

// nanos is t in Unix nanoseconds, 0 for the zero time. Times beyond what
// int64 nanoseconds hold (before 1678, after 2262) saturate at the ends
// of the range: a far-future time stays far in the future and a
// long-past one stays past, instead of wrapping around. The Unix epoch
// itself, 0 in nanoseconds, is stored as 1 ns after it: 0 means unset
// (a deadline or an expiry at the epoch must still count).
func nanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return 0
	case t.After(maxNanosTime):
		return math.MaxInt64
	case t.Before(minNanosTime):
		return math.MinInt64 + 1
	}
	if n := t.UnixNano(); n != 0 {
		return n
	}
	return 1
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

func marshal(m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		// Marshalling a well-formed generated message cannot fail.
		panic(fmt.Sprintf("marshal %T: %v", m, err))
	}
	return b
}

// stateOf reads a stored state.
func stateOf(st *storagev1.TaskStatus) broker.State { return broker.State(st.GetState()) }

// taskFrom assembles a broker.Task from its stored records; either may be nil.
func taskFrom(k key, spec *storagev1.TaskSpec, st *storagev1.TaskStatus) *broker.Task {
	t := &broker.Task{ID: k.String()}
	if spec != nil {
		fillFromSpec(t, spec)
	}
	if st != nil {
		t.State = stateOf(st)
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
		t.Group = st.GetGroup()
		t.ConcurrencyKey = st.GetConcurrencyKey()
		t.AtMostOnce = st.GetAtMostOnce()
		if st.Retention != nil {
			r := time.Duration(st.GetRetention())
			t.Retention = &r
		}
		for _, e := range st.GetErrors() {
			t.Errors = append(t.Errors, broker.AttemptError{Attempt: e.GetAttempt(), Message: e.GetMessage(), At: fromNanos(e.GetAt())})
		}
	}
	return t
}

// fillFromSpec copies a task's immutable fields from its spec.
func fillFromSpec(t *broker.Task, spec *storagev1.TaskSpec) {
	t.Queue, t.Type, t.Payload = spec.GetQueue(), spec.GetType(), spec.GetPayload()
	t.ContentType, t.Metadata, t.Options = spec.GetContentType(), spec.GetMetadata(), spec.GetOptions()
	t.Timeout = time.Duration(spec.GetTimeout())
	t.Deadline = fromNanos(spec.GetDeadline())
	if p := spec.GetRetryPolicy(); p != nil {
		t.RetryPolicy = &broker.RetryPolicy{Strategy: broker.RetryStrategy(p.GetStrategy()),
			Base: time.Duration(p.GetBase()), Max: time.Duration(p.GetMax())}
	}
	for _, d := range spec.GetDependsOn() {
		var id ulid.ULID
		copy(id[:], d.GetTaskId())
		t.DependsOn = append(t.DependsOn, broker.Dependency{TaskID: id.String(), OnFailure: broker.OnFailure(d.GetOnFailure())})
	}
}
