package brokertest

import (
	"bytes"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

func getTaskCases() []testCase {
	return []testCase{
		{name: "NotFound", fn: testGetTaskNotFound},
		{name: "RoundTrip", fn: testGetTaskRoundTrip},
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
	dep := EnqueueOne(t, b, T0, NewTask("other"))
	// Options are opaque to the broker: any bytes go back as they came.
	opts := []byte{0x0a, 0x03, 'o', 'p', 't', 0xff}
	nt := broker.NewTask{
		ID:             NewID(),
		Queue:          "rt.queue-1",
		Type:           "image:resize",
		Payload:        []byte{0, 1, 2, 0xfe, 0xff, '\n', 0},
		ContentType:    "application/octet-stream",
		Metadata:       map[string]string{"traceparent": "00-x-y-01", "empty": "", "ünïcode": "✓"},
		Options:        opts,
		Priority:       8,
		MaxRetry:       3,
		UniqueKey:      "rt",
		UniqueUntil:    at(time.Hour),
		ExpiresAt:      expires,
		Deadline:       deadline,
		Timeout:        90 * time.Second,
		RetryPolicy:    &broker.RetryPolicy{Strategy: broker.RetryLinear, Base: 2 * time.Second, Max: time.Minute},
		Retention:      &retention,
		ConcurrencyKey: "tenant-1",
		DependsOn:      []broker.Dependency{{TaskID: dep.ID, OnFailure: broker.OnFailureContinue}},
	}
	task := EnqueueOne(t, b, T0, nt)
	got := GetTask(t, b, nt.ID)
	want := &broker.Task{
		ID: nt.ID, Queue: nt.Queue, Type: nt.Type, Payload: nt.Payload, ContentType: nt.ContentType,
		Metadata: nt.Metadata, Options: opts, State: blocked, Priority: 8, MaxRetry: 3,
		UniqueKey: "rt", EnqueuedAt: T0, NextProcessAt: got.NextProcessAt, ExpiresAt: expires, Deadline: deadline,
		Timeout: nt.Timeout, RetryPolicy: nt.RetryPolicy, Retention: &retention, ConcurrencyKey: "tenant-1",
		DependsOn: nt.DependsOn,
	}
	// Both views carry the dependency's state.
	want.DependsOn = []broker.Dependency{{TaskID: dep.ID, OnFailure: broker.OnFailureContinue, State: pending}}
	RequireSameTask(t, "returned task", task, want)
	RequireSameTask(t, "stored task", got, want)

	plain := nt
	plain.ID, plain.UniqueKey, plain.DependsOn, plain.State = NewID(), "", nil, pending
	EnqueueOne(t, b, T0, plain)
	l := LeaseOne(t, b, "s1", nt.Queue, T0)
	if !bytes.Equal(l.Task.Payload, nt.Payload) || !bytes.Equal(l.Task.Options, opts) ||
		l.Task.ContentType != nt.ContentType || l.Task.Type != nt.Type || l.Task.Metadata["ünïcode"] != "✓" {
		t.Fatalf("leased task differs from the enqueued one: %+v", l.Task)
	}
	if !l.Task.Deadline.Equal(deadline) || l.Task.Timeout != nt.Timeout || *l.Task.RetryPolicy != *nt.RetryPolicy ||
		l.Task.SessionID != "s1" || l.Task.LeaseToken != l.Token {
		t.Fatalf("leased task carries deadline %v timeout %v policy %+v session %q token %d",
			l.Task.Deadline, l.Task.Timeout, l.Task.RetryPolicy, l.Task.SessionID, l.Task.LeaseToken)
	}
	if running := GetTask(t, b, plain.ID); running.SessionID != "s1" || running.LeaseToken != l.Token {
		t.Fatalf("GetTask of an ACTIVE task shows session %q token %d, want s1 and %d", running.SessionID, running.LeaseToken, l.Token)
	}
}
