package brokertest

import (
	"bytes"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

func getTaskCases() []testCase {
	return []testCase{
		{"NotFound", testGetTaskNotFound},
		{"RoundTrip", testGetTaskRoundTrip},
	}
}

func testGetTaskNotFound(t *testing.T, b broker.Broker) {
	EnqueueOne(t, b, T0, NewTask("q"))
	for _, id := range []string{NewID(), "not-a-ulid", "", "01ARZ3NDEKTSV4RRFFQ69G5FA"} {
		_, err := b.GetTask(t.Context(), id)
		requireErrIs(t, "GetTask("+id+")", err, broker.ErrNotFound)
	}
}

func testGetTaskRoundTrip(t *testing.T, b broker.Broker) {
	deadline := at(6 * time.Hour).Add(123456789)
	expires := at(5 * time.Hour).Add(987654321)
	retention := 48 * time.Hour
	opts := &conveyorv1.TaskOptions{
		MaxRetry:       3,
		Timeout:        durationpb.New(90 * time.Second),
		Deadline:       timestamppb.New(deadline),
		UniqueKey:      "rt",
		UniqueTtl:      durationpb.New(time.Hour),
		Priority:       8,
		Retention:      durationpb.New(retention),
		ExpiresAt:      timestamppb.New(expires),
		ConcurrencyKey: "tenant-1",
		RetryPolicy: &conveyorv1.RetryPolicy{
			Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_LINEAR,
			Base:     durationpb.New(2 * time.Second),
			Max:      durationpb.New(time.Minute),
		},
	}
	nt := broker.NewTask{
		ID:          NewID(),
		Queue:       "rt.queue-1",
		Type:        "image:resize",
		Payload:     []byte{0, 1, 2, 0xfe, 0xff, '\n', 0},
		ContentType: "application/octet-stream",
		Metadata:    map[string]string{"traceparent": "00-x-y-01", "empty": "", "ünïcode": "✓"},
		Options:     opts,
		Priority:    8,
		MaxRetry:    3,
		UniqueKey:   "rt",
		UniqueUntil: at(time.Hour),
		ExpiresAt:   expires,
		Retention:   &retention,
	}
	task := EnqueueOne(t, b, T0, nt)
	got := GetTask(t, b, nt.ID)
	want := &broker.Task{
		ID: nt.ID, Queue: nt.Queue, Type: nt.Type, Payload: nt.Payload, ContentType: nt.ContentType,
		Metadata: nt.Metadata, Options: opts, State: pending, Priority: 8, MaxRetry: 3,
		UniqueKey: "rt", EnqueuedAt: T0, NextProcessAt: got.NextProcessAt, ExpiresAt: expires, Deadline: deadline,
	}
	RequireSameTask(t, "stored task", got, want)
	RequireSameTask(t, "returned task", task, want)
	if !proto.Equal(got.Options, opts) {
		t.Fatalf("options did not round-trip:\n got %v\nwant %v", got.Options, opts)
	}

	l := LeaseOne(t, b, "s1", nt.Queue, T0)
	if !bytes.Equal(l.Task.Payload, nt.Payload) || !proto.Equal(l.Task.Options, opts) ||
		l.Task.ContentType != nt.ContentType || l.Task.Type != nt.Type || l.Task.Metadata["ünïcode"] != "✓" {
		t.Fatalf("leased task differs from the enqueued one: %+v", l.Task)
	}
	if !l.Task.Deadline.Equal(deadline) {
		t.Fatalf("leased task Deadline = %v, want %v", l.Task.Deadline, deadline)
	}
}
