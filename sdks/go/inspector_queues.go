package conveyor

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
)

// QueueInfo describes one queue: its pause flag, what it holds now in
// each state, its lasting totals and its effective configuration.
type QueueInfo struct {
	// Name is the queue's name.
	Name string
	// Paused is true while dispatch from the queue is stopped.
	Paused bool
	// The tasks the queue holds now in each state (Completed, Archived and
	// Canceled count those still retained).
	Scheduled, Pending, Active, Retry, Completed, Archived, Canceled, Aggregating, Blocked int64
	// Enqueued counts the tasks ever enqueued into the queue; its rate over
	// time is the queue's enqueue rate. It persists across restarts.
	Enqueued int64
	// Processed counts the attempts that ended with a worker's verdict; it
	// persists across restarts.
	Processed int64
	// Failed counts the attempts whose verdict was a retry or a permanent
	// failure; it persists across restarts.
	Failed int64
	// Config is the queue's effective configuration (defaults filled in).
	Config QueueConfig
	// UnservedTypes are the types of the queue's ready tasks that no live
	// worker can take (no session serving the queue declares them, or they
	// are at-most-once and none asks before it starts): they wait, pending.
	UnservedTypes []string
}

func newQueueInfo(m *conveyorv1.QueueInfo) *QueueInfo {
	return &QueueInfo{
		Name: m.GetName(), Paused: m.GetPaused(),
		Scheduled: m.GetScheduled(), Pending: m.GetPending(), Active: m.GetActive(), Retry: m.GetRetry(),
		Completed: m.GetCompleted(), Archived: m.GetArchived(), Canceled: m.GetCanceled(),
		Aggregating: m.GetAggregating(), Blocked: m.GetBlocked(),
		Enqueued: m.GetEnqueued(), Processed: m.GetProcessed(), Failed: m.GetFailed(),
		Config: newQueueConfig(m.GetConfig()), UnservedTypes: m.GetUnservedTypes(),
	}
}

// QueueConfig holds a queue's dispatch limits, group policy, backpressure
// bound and push endpoint. In a stored configuration (and one given to
// UpdateQueueConfig) a zero field means the default; in an effective one
// the defaults are filled in.
type QueueConfig struct {
	// Queue is the queue's name.
	Queue string
	// ConcurrencyLimit caps how many tasks sharing one concurrency key may
	// be active at once in the queue, across every worker. 0 means the
	// default, 1.
	ConcurrencyLimit int
	// MaxActive caps how many of the queue's tasks may be active at once,
	// across every worker. 0 means no limit.
	MaxActive int
	// RateLimit is a token bucket on the queue's dispatches.
	RateLimit RateLimit
	// GroupPolicy says when the queue's aggregation groups fire.
	GroupPolicy GroupPolicy
	// MaxWaiting bounds the tasks the queue may hold scheduled, pending,
	// retry, aggregating and blocked together; an enqueue past it waits
	// for room, then fails with ErrQueueFull. 0 means no bound.
	MaxWaiting int64
	// Push is the queue's HTTP push endpoint (docs/push.md); an empty URL
	// means none.
	Push PushEndpoint
}

// RateLimit is a token bucket on a queue's dispatches.
type RateLimit struct {
	// PerSecond is the refill rate; 0 means no limit.
	PerSecond int
	// Burst is the bucket's size; 0 means PerSecond.
	Burst int
}

// GroupPolicy says when an aggregation group fires: at whichever of its
// triggers comes first. A zero field takes the server's default.
type GroupPolicy struct {
	// MaxSize fires a group once it holds this many tasks.
	MaxSize int
	// MaxDelay fires a group this long after its first task was enqueued.
	MaxDelay time.Duration
	// GracePeriod fires a group this long after its latest task was enqueued.
	GracePeriod time.Duration
}

// PushEndpoint is an HTTP endpoint the server invokes with a queue's
// tasks, one signed POST per delivery (docs/push.md).
type PushEndpoint struct {
	// URL is the endpoint, http:// or https://; without a push secret the
	// server accepts only loopback URLs. Empty: no endpoint.
	URL string
	// Concurrency bounds the invocations in flight; 0 means 10.
	Concurrency int
	// Timeout is the longest one invocation may take; 0 means 30s. The
	// task's own timeout and deadline shorten it.
	Timeout time.Duration
}

func newQueueConfig(m *conveyorv1.QueueConfig) QueueConfig {
	return QueueConfig{
		Queue:            m.GetQueue(),
		ConcurrencyLimit: int(m.GetConcurrencyLimit()),
		MaxActive:        int(m.GetMaxActive()),
		RateLimit:        RateLimit{PerSecond: int(m.GetRateLimit().GetPerSecond()), Burst: int(m.GetRateLimit().GetBurst())},
		GroupPolicy: GroupPolicy{MaxSize: int(m.GetGroupPolicy().GetMaxSize()),
			MaxDelay: m.GetGroupPolicy().GetMaxDelay().AsDuration(), GracePeriod: m.GetGroupPolicy().GetGracePeriod().AsDuration()},
		MaxWaiting: m.GetMaxWaiting(),
		Push: PushEndpoint{URL: m.GetPush().GetUrl(), Concurrency: int(m.GetPush().GetConcurrency()),
			Timeout: m.GetPush().GetTimeout().AsDuration()},
	}
}

// proto is c on the wire. The int fields are 32-bit there: a value past
// that range would wrap into another value, so it is refused instead.
func (c QueueConfig) proto() (*conveyorv1.QueueConfig, error) {
	ints := []struct {
		name string
		v    int
	}{
		{"ConcurrencyLimit", c.ConcurrencyLimit}, {"MaxActive", c.MaxActive}, {"RateLimit.PerSecond", c.RateLimit.PerSecond},
		{"RateLimit.Burst", c.RateLimit.Burst}, {"GroupPolicy.MaxSize", c.GroupPolicy.MaxSize}, {"Push.Concurrency", c.Push.Concurrency},
	}
	for _, f := range ints {
		if int(int32(f.v)) != f.v {
			return nil, optionErrorf("QueueConfig.%s %d is out of range", f.name, f.v)
		}
	}
	return &conveyorv1.QueueConfig{
		Queue:            c.Queue,
		ConcurrencyLimit: int32(c.ConcurrencyLimit),
		MaxActive:        int32(c.MaxActive),
		RateLimit:        &conveyorv1.RateLimit{PerSecond: int32(c.RateLimit.PerSecond), Burst: int32(c.RateLimit.Burst)},
		GroupPolicy: &conveyorv1.GroupPolicy{MaxSize: int32(c.GroupPolicy.MaxSize),
			MaxDelay: durationOrNil(c.GroupPolicy.MaxDelay), GracePeriod: durationOrNil(c.GroupPolicy.GracePeriod)},
		MaxWaiting: c.MaxWaiting,
		Push: &conveyorv1.PushEndpoint{Url: c.Push.URL, Concurrency: int32(c.Push.Concurrency),
			Timeout: durationOrNil(c.Push.Timeout)},
	}, nil
}

// QueueSetting names one setting of a QueueConfig, for UpdateQueueConfig:
// its field's name on the wire (conveyor.v1.QueueConfig).
type QueueSetting string

// The settings UpdateQueueConfig can change one by one. A group
// (RateLimit, GroupPolicy, Push) names all of its fields at once.
const (
	QueueSettingConcurrencyLimit QueueSetting = "concurrency_limit"
	QueueSettingMaxActive        QueueSetting = "max_active"
	QueueSettingRateLimit        QueueSetting = "rate_limit"
	QueueSettingRatePerSecond    QueueSetting = "rate_limit.per_second"
	QueueSettingRateBurst        QueueSetting = "rate_limit.burst"
	QueueSettingGroupPolicy      QueueSetting = "group_policy"
	QueueSettingGroupMaxSize     QueueSetting = "group_policy.max_size"
	QueueSettingGroupMaxDelay    QueueSetting = "group_policy.max_delay"
	QueueSettingGroupGracePeriod QueueSetting = "group_policy.grace_period"
	QueueSettingMaxWaiting       QueueSetting = "max_waiting"
	QueueSettingPush             QueueSetting = "push"
	QueueSettingPushURL          QueueSetting = "push.url"
	QueueSettingPushConcurrency  QueueSetting = "push.concurrency"
	QueueSettingPushTimeout      QueueSetting = "push.timeout"
)

// ListQueues lists every queue the server knows, sorted by name.
func (i *Inspector) ListQueues(ctx context.Context) ([]*QueueInfo, error) {
	res, err := adminCall(ctx, i.admin, &conveyorv1.ListQueuesRequest{}, repeatable, conveyorv1connect.AdminServiceClient.ListQueues)
	if err != nil {
		return nil, err
	}
	out := make([]*QueueInfo, len(res.GetQueues()))
	for k, q := range res.GetQueues() {
		out[k] = newQueueInfo(q)
	}
	return out, nil
}

// GetQueue returns the queue named name. The AdminService has no call for
// one queue, so it lists them all and picks it: a queue the server does
// not know fails with ErrNotFound, and an invalid name with
// ErrInvalidArgument before any call.
func (i *Inspector) GetQueue(ctx context.Context, name string) (*QueueInfo, error) {
	if !validQueueName(name) {
		return nil, optionErrorf("queue %q is invalid: it is required and must match ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$ (at most %d bytes)",
			truncateName(name), maxNameBytes)
	}
	qs, err := i.ListQueues(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range qs {
		if q.Name == name {
			return q, nil
		}
	}
	return nil, notFoundf(fmt.Sprintf("queue %q: not found", name))
}

// PauseQueue stops dispatch from the queue (enqueues still succeed) and
// returns the queue, paused. Pausing a queue
// the server does not know yet creates it, paused. An invalid name fails
// with ErrInvalidArgument.
func (i *Inspector) PauseQueue(ctx context.Context, name string) (*QueueInfo, error) {
	res, err := adminCall(ctx, i.admin, &conveyorv1.PauseQueueRequest{Queue: name}, repeatable, conveyorv1connect.AdminServiceClient.PauseQueue)
	if err != nil {
		return nil, err
	}
	return newQueueInfo(res), nil
}

// ResumeQueue restarts dispatch from a paused queue and returns it. An
// invalid name fails with ErrInvalidArgument.
func (i *Inspector) ResumeQueue(ctx context.Context, name string) (*QueueInfo, error) {
	res, err := adminCall(ctx, i.admin, &conveyorv1.ResumeQueueRequest{Queue: name}, repeatable, conveyorv1connect.AdminServiceClient.ResumeQueue)
	if err != nil {
		return nil, err
	}
	return newQueueInfo(res), nil
}

// DeleteQueue forgets an empty queue for good: its pause flag, its
// configuration and its totals; a later enqueue, pause or configuration
// of the name starts a fresh queue. A queue that still holds a task in
// any state, or that a cron entry enqueues into, is refused with code
// failed_precondition (the message says what it holds); an unknown queue
// fails with ErrNotFound.
func (i *Inspector) DeleteQueue(ctx context.Context, name string) error {
	_, err := adminCall(ctx, i.admin, &conveyorv1.DeleteQueueRequest{Queue: name}, once, conveyorv1connect.AdminServiceClient.DeleteQueue)
	return err
}

// GetQueueConfig returns the queue's effective configuration: what it
// does, with every default filled in (its defaults if it was never
// configured).
func (i *Inspector) GetQueueConfig(ctx context.Context, name string) (*QueueConfig, error) {
	return i.queueConfig(ctx, name, false)
}

// GetStoredQueueConfig returns the queue's configuration as stored: a zero
// field wherever the queue follows the default. This is what
// UpdateQueueConfig takes back unchanged, so a read-modify-write of the
// whole configuration reads it here; one of the effective configuration
// (GetQueueConfig) would store today's defaults as the queue's own.
func (i *Inspector) GetStoredQueueConfig(ctx context.Context, name string) (*QueueConfig, error) {
	return i.queueConfig(ctx, name, true)
}

func (i *Inspector) queueConfig(ctx context.Context, name string, stored bool) (*QueueConfig, error) {
	res, err := adminCall(ctx, i.admin, &conveyorv1.GetQueueConfigRequest{Queue: name, Stored: stored}, repeatable,
		conveyorv1connect.AdminServiceClient.GetQueueConfig)
	if err != nil {
		return nil, err
	}
	c := newQueueConfig(res)
	return &c, nil
}

// UpdateQueueConfig changes the configuration of the queue cfg.Queue names
// and returns its effective configuration after. With settings, only
// those are stored from cfg, and the others keep their values: the server
// reads and writes the configuration in one step, so two callers changing
// different settings at once both keep their change, and a setting that
// followed a default still does. Without settings, cfg replaces the whole
// configuration (read it with GetStoredQueueConfig first to keep the
// rest). A zero value makes a setting follow its default again.
//
//	// Cap the queue at 10 active tasks, whatever else is set.
//	insp.UpdateQueueConfig(ctx, conveyor.QueueConfig{Queue: "emails", MaxActive: 10}, conveyor.QueueSettingMaxActive)
//
// A value out of range, or a setting that is not one, fails with
// ErrInvalidArgument naming it.
func (i *Inspector) UpdateQueueConfig(ctx context.Context, cfg QueueConfig, settings ...QueueSetting) (*QueueConfig, error) {
	m, err := cfg.proto()
	if err != nil {
		return nil, err
	}
	req := &conveyorv1.UpdateQueueConfigRequest{Config: m}
	if len(settings) > 0 {
		req.UpdateMask = &fieldmaskpb.FieldMask{Paths: make([]string, len(settings))}
		for k, s := range settings {
			req.UpdateMask.Paths[k] = string(s)
		}
	}
	res, err := adminCall(ctx, i.admin, req, repeatable, conveyorv1connect.AdminServiceClient.UpdateQueueConfig)
	if err != nil {
		return nil, err
	}
	c := newQueueConfig(res)
	return &c, nil
}
