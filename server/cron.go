package server

import (
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/scheduler"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// Metadata keys every fired task carries (CONTRACT.md): the entry's id,
// and the fire's scheduled time in RFC 3339, UTC.
const (
	CronIDKey   = "conveyor-cron-id"
	CronFireKey = "conveyor-cron-fire"
)

// MaxCronSpecBytes bounds a cron entry's spec.
const MaxCronSpecBytes = 1024

// cronEntry validates a wire entry for CreateCron or UpdateCron and
// returns it as stored, its next run counted from now by its spec; an
// empty id gets a ULID.
func cronEntry(w *conveyorv1.CronEntry, now time.Time) (broker.CronEntry, error) {
	sched, err := cronSchedule(w.GetSpec(), now)
	if err != nil {
		return broker.CronEntry{}, err
	}
	e, err := cronTemplate(w, now)
	if err == nil && !e.Paused {
		e.NextRun = sched.Next(now)
	}
	return e, err
}

// cronSchedule parses a cron entry's spec. A spec that names a time zone
// (CRON_TZ=) reads the zone's file, so callers parse outside the engine's
// lock.
func cronSchedule(spec string, now time.Time) (scheduler.CronSchedule, error) {
	if len(spec) > MaxCronSpecBytes {
		return nil, invalidf("spec is %d bytes; the limit is %d", len(spec), MaxCronSpecBytes)
	}
	sched, err := scheduler.ParseCronSpec(spec, now)
	if err != nil {
		return nil, &invalid{msg: err.Error()}
	}
	return sched, nil
}

// cronTemplate validates everything of a wire entry but its spec and
// returns it as stored, without a next run. The task template is checked
// the way a fire will build it, so a stored entry's fires are refused only
// for what changes after (a unique key held, a dependency gone).
func cronTemplate(w *conveyorv1.CronEntry, now time.Time) (broker.CronEntry, error) {
	e := broker.CronEntry{ID: w.GetId(), Spec: w.GetSpec(), Queue: w.GetQueue(), Type: w.GetType(),
		Payload: w.GetPayload(), ContentType: w.GetContentType(), Metadata: w.GetMetadata(),
		Options: encodeOptions(w.GetOptions()), Paused: w.GetPaused()}
	if e.ID == "" {
		e.ID = ulid.Make().String()
	} else if !wire.ValidQueueName(e.ID) {
		return e, invalidf("id %q is invalid: it must match ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$ (at most %d bytes)", wire.TruncateUTF8(e.ID, wire.MaxEchoBytes), MaxNameBytes)
	}
	o := w.GetOptions()
	fixed := []struct {
		name string
		set  bool
	}{{"deadline", o.GetDeadline() != nil}, {"process_at", o.GetProcessAt() != nil}, {"expires_at", o.GetExpiresAt() != nil}}
	for _, f := range fixed {
		if f.set {
			return e, invalidf("options.%s is a fixed time, and a cron entry fires again and again: give its task a relative time (process_in, expires_in, timeout) instead", f.name)
		}
	}
	if n := len(e.Metadata); n > MaxMetadataEntries-2 {
		return e, invalidf("metadata has %d entries; a cron entry may have %d (each fire adds %s and %s)",
			n, MaxMetadataEntries-2, CronIDKey, CronFireKey)
	}
	nt, err := cronTask(e, now)
	if err != nil {
		return e, err
	}
	e.Queue, e.ContentType = nt.Queue, nt.ContentType
	return e, nil
}

// cronTask is the task a fire of e scheduled at fireAt enqueues: the
// entry's template, validated as any enqueue, with relative times counted
// from the scheduled time.
func cronTask(e broker.CronEntry, fireAt time.Time) (broker.NewTask, error) {
	md := make(map[string]string, len(e.Metadata)+2)
	for k, v := range e.Metadata {
		md[k] = v
	}
	md[CronIDKey] = e.ID
	md[CronFireKey] = fireAt.UTC().Format(time.RFC3339)
	return newTask(&conveyorv1.EnqueueRequest{Queue: e.Queue, Type: e.Type, Payload: e.Payload,
		ContentType: e.ContentType, Metadata: md, Options: wire.DecodeOptions(e.Options)}, fireAt)
}

// cronInfo is a stored entry on the wire.
func cronInfo(e broker.CronEntry) *conveyorv1.CronEntry {
	w := &conveyorv1.CronEntry{Id: e.ID, Spec: e.Spec, Queue: e.Queue, Type: e.Type, Payload: e.Payload,
		ContentType: e.ContentType, Metadata: e.Metadata, Options: wire.DecodeOptions(e.Options), Paused: e.Paused,
		LastTaskId: e.LastTaskID, LastError: e.LastError}
	if !e.Paused && !e.NextRun.IsZero() {
		w.NextRunAt = ts(e.NextRun)
	}
	if !e.LastRun.IsZero() {
		w.LastRunAt = ts(e.LastRun)
	}
	return w
}
