package server

import (
	"errors"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// FuzzNewTask feeds newTask every EnqueueRequest the fuzzer can encode. It
// must never panic; a request it accepts must come out with every default
// applied and every bound held, and one it refuses must say why.
//
//	go test ./server -run '^$' -fuzz FuzzNewTask -fuzztime 30s
func FuzzNewTask(f *testing.F) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	seeds := []*conveyorv1.EnqueueRequest{
		{Type: "t"},
		{Type: "t", Queue: "q.a-b_c", Payload: []byte(`{}`), Metadata: map[string]string{"k": "v"}},
		{Type: "t", Options: &conveyorv1.TaskOptions{ProcessIn: durationpb.New(time.Minute), MaxRetry: 3, Priority: 9,
			UniqueKey: "u", UniqueTtl: durationpb.New(time.Hour), Retention: durationpb.New(0)}},
		{Type: "t", Options: &conveyorv1.TaskOptions{ProcessAt: timestamppb.New(now), ExpiresAt: timestamppb.New(now.Add(time.Hour)),
			Deadline: &timestamppb.Timestamp{Seconds: 253402300799}, Timeout: &durationpb.Duration{Seconds: 315576000000}}},
		{Type: "t", Options: &conveyorv1.TaskOptions{DependsOn: []*conveyorv1.TaskDependency{{TaskId: "01J00000000000000000000000"}},
			RetryPolicy: &conveyorv1.RetryPolicy{Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_LINEAR, Base: durationpb.New(time.Second)}}},
		{TaskId: "not-a-ulid", Type: "t"},
		{Type: "t", Options: &conveyorv1.TaskOptions{Priority: -1, ProcessIn: &durationpb.Duration{Seconds: -1}}},
	}
	for _, s := range seeds {
		b, err := proto.Marshal(s)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var req conveyorv1.EnqueueRequest
		if proto.Unmarshal(raw, &req) != nil {
			return
		}
		nt, err := newTask(&req, now)
		if err != nil {
			var inv *invalid
			if !errors.As(err, &inv) || err.Error() == "" || !utf8.ValidString(err.Error()) {
				t.Fatalf("newTask refused with %T %q, want an *invalid with a message", err, err)
			}
			return
		}
		switch {
		case !wire.ValidQueueName(nt.Queue):
			t.Fatalf("accepted queue %q", nt.Queue)
		case nt.Type == "" || len(nt.Type) > MaxNameBytes:
			t.Fatalf("accepted type of %d bytes", len(nt.Type))
		case nt.Priority < 1 || nt.Priority > 9:
			t.Fatalf("accepted priority %d", nt.Priority)
		case nt.MaxRetry < 1:
			t.Fatalf("accepted max_retry %d (the default is %d)", nt.MaxRetry, DefaultMaxRetry)
		case len(nt.Payload) > MaxPayloadBytes:
			t.Fatalf("accepted a payload of %d bytes", len(nt.Payload))
		case nt.ContentType == "":
			t.Fatal("no content type after defaults")
		case len(nt.Metadata) > MaxMetadataEntries:
			t.Fatalf("accepted %d metadata entries", len(nt.Metadata))
		case len(nt.DependsOn) > MaxDependencies:
			t.Fatalf("accepted %d dependencies", len(nt.DependsOn))
		case nt.UniqueUntil.IsZero() != (req.GetOptions().GetUniqueTtl().AsDuration() <= 0):
			t.Fatalf("unique_until %v for unique_ttl %v", nt.UniqueUntil, req.GetOptions().GetUniqueTtl())
		}
		if req.GetOptions().GetProcessAt() != nil && req.GetOptions().GetProcessIn() != nil {
			t.Fatal("accepted process_at with process_in")
		}
	})
}
