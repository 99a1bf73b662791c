package server

import (
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// Task defaults of the protocol (§6.1).
const (
	DefaultQueue       = "default"
	DefaultContentType = "application/json"
	DefaultMaxRetry    = 25
	DefaultPriority    = 4
)

// invalid is a validation failure; its message names the offending field.
type invalid struct{ msg string }

func (e *invalid) Error() string { return e.msg }

func invalidf(format string, args ...any) error { return &invalid{msg: fmt.Sprintf(format, args...)} }

// newTask validates one EnqueueRequest and resolves every default and
// relative time against now. Errors are *invalid and name the field.
func newTask(req *conveyorv1.EnqueueRequest, now time.Time) (broker.NewTask, error) {
	nt := broker.NewTask{
		ID:          req.GetTaskId(),
		Queue:       req.GetQueue(),
		Type:        req.GetType(),
		Payload:     req.GetPayload(),
		ContentType: req.GetContentType(),
		Metadata:    req.GetMetadata(),
		Options:     encodeOptions(req.GetOptions()),
		MaxRetry:    DefaultMaxRetry,
		Priority:    DefaultPriority,
	}
	if nt.ID != "" {
		id, err := ulid.ParseStrict(nt.ID)
		if err != nil {
			return nt, invalidf("task_id %q is not a ULID: %v", wire.TruncateUTF8(nt.ID, wire.MaxEchoBytes), err)
		}
		nt.ID = id.String()
	}
	if nt.Queue == "" {
		nt.Queue = DefaultQueue
	}
	if !wire.ValidQueueName(nt.Queue) {
		return nt, invalidf("queue %q is invalid: it must match ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$ (at most %d bytes)", wire.TruncateUTF8(nt.Queue, wire.MaxEchoBytes), MaxNameBytes)
	}
	if nt.Type == "" {
		return nt, invalidf("type is required")
	}
	if len(nt.Type) > MaxNameBytes {
		return nt, invalidf("type is %d bytes; the limit is %d", len(nt.Type), MaxNameBytes)
	}
	if len(nt.Payload) > MaxPayloadBytes {
		return nt, invalidf("payload is %d bytes; the limit is %d (1 MiB)", len(nt.Payload), MaxPayloadBytes)
	}
	if nt.ContentType == "" {
		nt.ContentType = DefaultContentType
	}
	if len(nt.ContentType) > MaxNameBytes {
		return nt, invalidf("content_type is %d bytes; the limit is %d", len(nt.ContentType), MaxNameBytes)
	}
	if err := checkMetadata(nt.Metadata); err != nil {
		return nt, err
	}
	if err := applyOptions(&nt, req.GetOptions(), now); err != nil {
		return nt, err
	}
	nt.State = initialState(&nt, now)
	return nt, nil
}

// initialState is the state a new task starts in: BLOCKED when it has
// dependencies (once they are done it joins its group, if it has one),
// AGGREGATING when it is grouped, SCHEDULED when it is delayed, else
// PENDING. (The options that would conflict are refused before.)
func initialState(nt *broker.NewTask, now time.Time) broker.State {
	switch {
	case len(nt.DependsOn) > 0:
		return broker.StateBlocked
	case nt.Group != "":
		return broker.StateAggregating
	case nt.ProcessAt.After(now):
		return broker.StateScheduled
	}
	return broker.StatePending
}

// checkMetadata enforces MaxMetadataEntries and MaxMetadataBytes.
func checkMetadata(md map[string]string) error {
	if len(md) > MaxMetadataEntries {
		return invalidf("metadata has %d entries; the limit is %d", len(md), MaxMetadataEntries)
	}
	n := 0
	for k, v := range md {
		n += len(k) + len(v)
	}
	if n > MaxMetadataBytes {
		return invalidf("metadata keys and values are %d bytes in all; the limit is %d (64 KiB)", n, MaxMetadataBytes)
	}
	return nil
}

func applyOptions(nt *broker.NewTask, o *conveyorv1.TaskOptions, now time.Time) error {
	if o == nil {
		return nil
	}
	if o.GetMaxRetry() < 0 {
		return invalidf("options.max_retry must not be negative, got %d", o.GetMaxRetry())
	}
	if o.GetMaxRetry() > 0 {
		nt.MaxRetry = o.GetMaxRetry()
	}
	if p := o.GetPriority(); p < 0 || p > 9 {
		return invalidf("options.priority must be 1..9 (0 means the default, %d), got %d", DefaultPriority, p)
	} else if p > 0 {
		nt.Priority = p
	}
	durations := []struct {
		name string
		d    *durationpb.Duration
	}{
		{"timeout", o.GetTimeout()}, {"process_in", o.GetProcessIn()}, {"unique_ttl", o.GetUniqueTtl()},
		{"retention", o.GetRetention()}, {"expires_in", o.GetExpiresIn()},
		{"retry_policy.base", o.GetRetryPolicy().GetBase()}, {"retry_policy.max", o.GetRetryPolicy().GetMax()},
	}
	for _, f := range durations {
		if f.d == nil {
			continue
		}
		if err := f.d.CheckValid(); err != nil {
			return invalidf("options.%s is not a valid duration: %v", f.name, err)
		}
		if f.d.AsDuration() < 0 {
			return invalidf("options.%s must not be negative, got %s", f.name, f.d.AsDuration())
		}
	}
	times := []struct {
		name string
		t    *timestamppb.Timestamp
	}{{"deadline", o.GetDeadline()}, {"process_at", o.GetProcessAt()}, {"expires_at", o.GetExpiresAt()}}
	for _, f := range times {
		if f.t == nil {
			continue
		}
		if err := f.t.CheckValid(); err != nil {
			return invalidf("options.%s is not a valid timestamp: %v", f.name, err)
		}
	}
	if o.GetProcessAt() != nil && o.GetProcessIn() != nil {
		return invalidf("options.process_at and options.process_in are mutually exclusive")
	}
	if o.GetExpiresAt() != nil && o.GetExpiresIn() != nil {
		return invalidf("options.expires_at and options.expires_in are mutually exclusive")
	}
	if o.GetGroup() != "" && (o.GetProcessAt() != nil || o.GetProcessIn() != nil) {
		return invalidf("options.group is mutually exclusive with options.process_at and options.process_in")
	}
	if o.GetGroup() != "" && o.GetConcurrencyKey() != "" {
		return invalidf("options.group and options.concurrency_key are mutually exclusive")
	}
	if o.GetGroup() != "" && o.GetAtMostOnce() {
		// A batch runs its members under one handler call: there is no
		// one start to authorize per member.
		return invalidf("options.at_most_once and options.group are mutually exclusive")
	}
	if o.GetUniqueTtl() != nil && o.GetUniqueKey() == "" {
		return invalidf("options.unique_ttl requires options.unique_key")
	}
	for name, s := range map[string]string{"unique_key": o.GetUniqueKey(), "group": o.GetGroup(), "concurrency_key": o.GetConcurrencyKey()} {
		if len(s) > MaxNameBytes {
			return invalidf("options.%s is %d bytes; the limit is %d", name, len(s), MaxNameBytes)
		}
	}
	if err := validRetryPolicy(o.GetRetryPolicy()); err != nil {
		return err
	}
	deps, err := dependencies(o.GetDependsOn())
	if err != nil {
		return err
	}
	nt.DependsOn = deps

	switch {
	case o.GetProcessAt() != nil:
		nt.ProcessAt = o.GetProcessAt().AsTime()
	case o.GetProcessIn() != nil:
		nt.ProcessAt = now.Add(o.GetProcessIn().AsDuration())
	}
	switch {
	case o.GetExpiresAt() != nil:
		nt.ExpiresAt = o.GetExpiresAt().AsTime()
	case o.GetExpiresIn() != nil:
		nt.ExpiresAt = now.Add(o.GetExpiresIn().AsDuration())
	}
	nt.UniqueKey = o.GetUniqueKey()
	if o.GetUniqueTtl() != nil && o.GetUniqueTtl().AsDuration() > 0 {
		nt.UniqueUntil = now.Add(o.GetUniqueTtl().AsDuration())
	}
	if o.GetRetention() != nil {
		r := o.GetRetention().AsDuration()
		nt.Retention = &r
	}
	nt.Group = o.GetGroup()
	nt.ConcurrencyKey = o.GetConcurrencyKey()
	nt.AtMostOnce = o.GetAtMostOnce()
	nt.Timeout = o.GetTimeout().AsDuration()
	if o.GetDeadline() != nil {
		nt.Deadline = o.GetDeadline().AsTime()
	}
	nt.RetryPolicy = brokerRetryPolicy(o.GetRetryPolicy())
	return nil
}

func validRetryPolicy(p *conveyorv1.RetryPolicy) error {
	if p == nil {
		return nil
	}
	if _, ok := conveyorv1.RetryStrategy_name[int32(p.GetStrategy())]; !ok {
		return invalidf("options.retry_policy.strategy %d is not a RetryStrategy", p.GetStrategy())
	}
	if p.GetBase() != nil && p.GetMax() != nil && p.GetMax().AsDuration() > 0 &&
		p.GetMax().AsDuration() < p.GetBase().AsDuration() {
		return invalidf("options.retry_policy.max (%s) is less than options.retry_policy.base (%s)",
			p.GetMax().AsDuration(), p.GetBase().AsDuration())
	}
	return nil
}

func dependencies(in []*conveyorv1.TaskDependency) ([]broker.Dependency, error) {
	if len(in) == 0 {
		return nil, nil
	}
	if len(in) > MaxDependencies {
		return nil, invalidf("options.depends_on lists %d tasks; the limit is %d", len(in), MaxDependencies)
	}
	out := make([]broker.Dependency, len(in))
	for i, d := range in {
		id, err := ulid.ParseStrict(d.GetTaskId())
		if err != nil {
			return nil, invalidf("options.depends_on[%d].task_id %q is not a ULID", i, wire.TruncateUTF8(d.GetTaskId(), wire.MaxEchoBytes))
		}
		if _, ok := conveyorv1.OnFailure_name[int32(d.GetOnFailure())]; !ok {
			return nil, invalidf("options.depends_on[%d].on_failure %d is not an OnFailure", i, d.GetOnFailure())
		}
		out[i] = broker.Dependency{TaskID: id.String(), OnFailure: broker.OnFailure(d.GetOnFailure())}
	}
	return out, nil
}
