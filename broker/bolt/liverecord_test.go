package bolt

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	storagev1 "github.com/conveyor-dev/conveyor/gen/conveyor/storage/v1"
)

// TestLiveRecordMatchesUnmarshal decodes random statuses, with every field
// the indexes read and the ones they skip, both ways: the wire decoder
// must find what proto.Unmarshal finds.
func TestLiveRecordMatchesUnmarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	some := func(s string) string {
		if rng.IntN(2) == 0 {
			return ""
		}
		return fmt.Sprintf("%s-%d", s, rng.IntN(1000))
	}
	num := func() int64 {
		if rng.IntN(3) == 0 {
			return 0
		}
		return rng.Int64N(1<<62) - 1<<61 // negative too
	}
	var r liveRecord
	for i := range 2000 {
		st := &storagev1.TaskStatus{
			State: int32(rng.IntN(12)), Queue: some("q"), Priority: int32(rng.IntN(10)),
			Retried: int32(num()), MaxRetry: int32(num()), EnqueuedAt: num(), NextProcessAt: num(),
			StartedAt: num(), CompletedAt: num(), LastError: some("boom"), Result: []byte(some("r")),
			ProgressPercent: int32(rng.IntN(100)), ProgressMessage: some("p"), UniqueKey: some("u"),
			UniqueUntil: num(), ExpiresAt: num(), PurgeAt: num(), Deadline: num(), Group: some("g"),
			ConcurrencyKey: some("c"), Type: some("t"), CancelRequested: rng.IntN(2) == 0,
			DependencyFailed: rng.IntN(2) == 0,
		}
		if rng.IntN(2) == 0 {
			v := num()
			st.Retention = &v
		}
		for range rng.IntN(3) {
			st.WaitingOn = append(st.WaitingOn, &storagev1.DependencyRecord{TaskId: []byte(some("id")), OnFailure: int32(rng.IntN(3))})
			st.Errors = append(st.Errors, &storagev1.AttemptErrorRecord{})
		}
		b, err := proto.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 { // a field this build does not know
			b = protowire.AppendTag(b, 99, protowire.BytesType)
			b = protowire.AppendBytes(b, []byte("future"))
		}
		if err := r.decode(b); err != nil {
			t.Fatalf("decode of %v: %v", st, err)
		}
		var want storagev1.TaskStatus
		if err := proto.Unmarshal(b, &want); err != nil {
			t.Fatal(err)
		}
		got := []any{r.state, string(r.queue), r.priority, r.retried, r.maxRetry, r.enqueuedAt, r.nextProcessAt,
			string(r.uniqueKey), r.uniqueUntil, r.expiresAt, r.deadline, r.hasRetention, r.retention,
			string(r.group), string(r.concurrencyKey), string(r.typ), r.cancelRequested, r.dependencyFailed, len(r.waitingOn)}
		exp := []any{want.GetState(), want.GetQueue(), want.GetPriority(), want.GetRetried(), want.GetMaxRetry(),
			want.GetEnqueuedAt(), want.GetNextProcessAt(), want.GetUniqueKey(), want.GetUniqueUntil(), want.GetExpiresAt(),
			want.GetDeadline(), want.Retention != nil, want.GetRetention(), want.GetGroup(), want.GetConcurrencyKey(),
			want.GetType(), want.GetCancelRequested(), want.GetDependencyFailed(), len(want.GetWaitingOn())}
		if fmt.Sprint(got) != fmt.Sprint(exp) {
			t.Fatalf("record %d:\n got %v\nwant %v", i, got, exp)
		}
		for j, d := range want.GetWaitingOn() {
			if !bytes.Equal(r.waitingOn[j].taskID, d.GetTaskId()) || r.waitingOn[j].onFailure != d.GetOnFailure() {
				t.Fatalf("record %d dependency %d: got %+v, want %v", i, j, r.waitingOn[j], d)
			}
		}
	}
}

// TestLiveRecordRefusesTruncatedBytes: a record cut anywhere inside a
// field is an error, not a silently partial status.
func TestLiveRecordRefusesTruncatedBytes(t *testing.T) {
	b, err := proto.Marshal(&storagev1.TaskStatus{State: 2, Queue: "a-queue", Priority: 4, EnqueuedAt: 1 << 40,
		WaitingOn: []*storagev1.DependencyRecord{{TaskId: bytes.Repeat([]byte{7}, 16), OnFailure: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	var r liveRecord
	if err := r.decode(b); err != nil {
		t.Fatal(err)
	}
	// A cut between two fields leaves a shorter, valid message; a cut
	// inside a field must be refused.
	between := map[int]bool{}
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		off += n + protowire.ConsumeFieldValue(num, typ, b[off+n:])
		between[off] = true
	}
	for n := 1; n < len(b); n++ {
		if err := r.decode(b[:n]); (err == nil) != between[n] {
			t.Errorf("cut at %d of %d bytes: error %v, between fields %v", n, len(b), err, between[n])
		}
	}
}
