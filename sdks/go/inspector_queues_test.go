package conveyor_test

import (
	"testing"

	"connectrpc.com/connect"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// TestInspectorQueuePause: a queue paused reads paused, and resumed reads
// resumed; ListQueues and GetQueue see what the queue holds.
func TestInspectorQueuePause(t *testing.T) {
	t.Parallel()
	b := inspSetup(t)
	b.enqueue("t", conveyor.Queue("emails"))
	b.enqueue("t", conveyor.Queue("reports"))

	qs, err := b.insp.ListQueues(b.ctx)
	if err != nil {
		t.Fatalf("ListQueues: %v", err)
	}
	var names []string
	for _, q := range qs {
		names = append(names, q.Name)
	}
	eq(t, "ListQueues' names", len(names), 2)
	eq(t, "ListQueues' first", names[0], "emails")
	eq(t, "ListQueues' second", names[1], "reports")
	eq(t, "emails' pending", qs[0].Pending, 1)
	eq(t, "emails' enqueued", qs[0].Enqueued, 1)
	eq(t, "emails' effective concurrency limit", qs[0].Config.ConcurrencyLimit, 1)

	q, err := b.insp.PauseQueue(b.ctx, "emails")
	if err != nil || !q.Paused || q.Name != "emails" {
		t.Fatalf("PauseQueue: %v %+v", err, q)
	}
	if q, err = b.insp.GetQueue(b.ctx, "emails"); err != nil || !q.Paused || q.Pending != 1 {
		t.Fatalf("GetQueue of the paused queue: %v %+v", err, q)
	}
	if q, err = b.insp.ResumeQueue(b.ctx, "emails"); err != nil || q.Paused {
		t.Fatalf("ResumeQueue: %v %+v", err, q)
	}
	if q, err = b.insp.GetQueue(b.ctx, "emails"); err != nil || q.Paused {
		t.Fatalf("GetQueue of the resumed queue: %v %+v", err, q)
	}

	_, err = b.insp.GetQueue(b.ctx, "never-used")
	wantIs(t, "GetQueue of an unknown queue", err, conveyor.ErrNotFound)
	_, err = b.insp.GetQueue(b.ctx, "not valid")
	wantIs(t, "GetQueue of an invalid name", err, conveyor.ErrInvalidArgument)
	_, err = b.insp.ResumeQueue(b.ctx, "")
	wantIs(t, "ResumeQueue of no name", err, conveyor.ErrInvalidArgument)
}

// TestInspectorQueueConfig: an update with settings changes only those,
// one without replaces the whole configuration, and each reads back as
// stored and as effective.
func TestInspectorQueueConfig(t *testing.T) {
	t.Parallel()
	b := inspSetup(t)
	got, err := b.insp.UpdateQueueConfig(b.ctx, conveyor.QueueConfig{Queue: "emails", MaxActive: 5, ConcurrencyLimit: 7},
		conveyor.QueueSettingMaxActive)
	if err != nil {
		t.Fatalf("UpdateQueueConfig: %v", err)
	}
	eq(t, "the answer's max active", got.MaxActive, 5)
	eq(t, "the answer's concurrency limit (not in the settings)", got.ConcurrencyLimit, 1)

	if got, err = b.insp.UpdateQueueConfig(b.ctx, conveyor.QueueConfig{Queue: "emails", RateLimit: conveyor.RateLimit{PerSecond: 50}},
		conveyor.QueueSettingRatePerSecond); err != nil || got.RateLimit.PerSecond != 50 || got.MaxActive != 5 {
		t.Fatalf("UpdateQueueConfig of the rate: %v %+v", err, got)
	}
	eff, err := b.insp.GetQueueConfig(b.ctx, "emails")
	if err != nil {
		t.Fatalf("GetQueueConfig: %v", err)
	}
	eq(t, "effective max active", eff.MaxActive, 5)
	eq(t, "effective rate", eff.RateLimit.PerSecond, 50)
	eq(t, "effective burst (the rate's)", eff.RateLimit.Burst, 50)
	eq(t, "effective concurrency limit", eff.ConcurrencyLimit, 1)
	if eff.GroupPolicy.MaxSize == 0 {
		t.Errorf("the effective group policy holds no server default: %+v", eff.GroupPolicy)
	}

	stored, err := b.insp.GetStoredQueueConfig(b.ctx, "emails")
	if err != nil {
		t.Fatalf("GetStoredQueueConfig: %v", err)
	}
	want := conveyor.QueueConfig{Queue: "emails", MaxActive: 5, RateLimit: conveyor.RateLimit{PerSecond: 50}}
	eq(t, "the stored configuration", *stored, want)

	// A read-modify-write of the stored configuration keeps the rest.
	stored.MaxWaiting = 100
	if got, err = b.insp.UpdateQueueConfig(b.ctx, *stored); err != nil {
		t.Fatalf("UpdateQueueConfig of the whole: %v", err)
	}
	eq(t, "max waiting after the replace", got.MaxWaiting, 100)
	eq(t, "max active after the replace", got.MaxActive, 5)
	eq(t, "burst after the replace (still the rate's)", got.RateLimit.Burst, 50)

	_, err = b.insp.UpdateQueueConfig(b.ctx, conveyor.QueueConfig{Queue: "emails"}, conveyor.QueueSetting("paused"))
	wantIs(t, "UpdateQueueConfig of a setting that is not one", err, conveyor.ErrInvalidArgument)
	_, err = b.insp.UpdateQueueConfig(b.ctx, conveyor.QueueConfig{Queue: "emails", MaxActive: -1}, conveyor.QueueSettingMaxActive)
	wantIs(t, "UpdateQueueConfig of a negative max active", err, conveyor.ErrInvalidArgument)
	_, err = b.insp.UpdateQueueConfig(b.ctx, conveyor.QueueConfig{Queue: "emails", MaxActive: 1 << 32}, conveyor.QueueSettingMaxActive)
	wantIs(t, "UpdateQueueConfig of a max active past 32 bits", err, conveyor.ErrInvalidArgument)
	_, err = b.insp.GetQueueConfig(b.ctx, "no good")
	wantIs(t, "GetQueueConfig of an invalid name", err, conveyor.ErrInvalidArgument)
	if eff, err = b.insp.GetQueueConfig(b.ctx, "emails"); err != nil || eff.MaxActive != 5 {
		t.Fatalf("the refused updates changed the configuration: %v %+v", err, eff)
	}
}

// TestInspectorDeleteQueue: an empty queue is forgotten; one that holds a
// task is refused.
func TestInspectorDeleteQueue(t *testing.T) {
	t.Parallel()
	b := inspSetup(t)
	b.enqueue("t", conveyor.Queue("busy"))
	wantCode(t, "DeleteQueue of a queue with a task", b.insp.DeleteQueue(b.ctx, "busy"), connect.CodeFailedPrecondition)

	if _, err := b.insp.PauseQueue(b.ctx, "empty"); err != nil {
		t.Fatalf("PauseQueue: %v", err)
	}
	if q, err := b.insp.GetQueue(b.ctx, "empty"); err != nil || !q.Paused {
		t.Fatalf("GetQueue of the queue PauseQueue made: %v %+v", err, q)
	}
	if err := b.insp.DeleteQueue(b.ctx, "empty"); err != nil {
		t.Fatalf("DeleteQueue: %v", err)
	}
	_, err := b.insp.GetQueue(b.ctx, "empty")
	wantIs(t, "GetQueue after DeleteQueue", err, conveyor.ErrNotFound)
	wantIs(t, "DeleteQueue again", b.insp.DeleteQueue(b.ctx, "empty"), conveyor.ErrNotFound)
	wantIs(t, "DeleteQueue of an invalid name", b.insp.DeleteQueue(b.ctx, ""), conveyor.ErrInvalidArgument)
}
