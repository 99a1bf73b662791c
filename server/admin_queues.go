package server

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
	"github.com/conveyor-dev/conveyor/server/push"
)

func (a *adminService) queueInfo(ctx context.Context, q broker.QueueInfo) *conveyorv1.QueueInfo {
	info := queueInfo(q)
	info.Config = a.effectiveConfig(q.Name, q.Config)
	info.UnservedTypes = a.server.unservedTypes(ctx, q)
	return info
}

func (a *adminService) ListQueues(ctx context.Context, _ *connect.Request[conveyorv1.ListQueuesRequest]) (*connect.Response[conveyorv1.ListQueuesResponse], error) {
	qs, err := a.broker.Queues(ctx)
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	out := &conveyorv1.ListQueuesResponse{}
	for _, q := range qs {
		out.Queues = append(out.Queues, a.queueInfo(ctx, q))
	}
	return connect.NewResponse(out), nil
}

func checkQueueName(field, name string) error {
	if !wire.ValidQueueName(name) {
		return connect.NewError(connect.CodeInvalidArgument,
			fmt.Errorf("%s %q is invalid: it is required and must match ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$ (at most %d bytes)", field, wire.TruncateUTF8(name, wire.MaxEchoBytes), MaxNameBytes))
	}
	return nil
}

func (a *adminService) setPaused(ctx context.Context, name string, paused bool) (*connect.Response[conveyorv1.QueueInfo], error) {
	if err := checkQueueName("queue", name); err != nil {
		return nil, err
	}
	q, err := a.broker.SetQueuePaused(ctx, name, paused)
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	return connect.NewResponse(a.queueInfo(ctx, q)), nil
}

func (a *adminService) PauseQueue(ctx context.Context, req *connect.Request[conveyorv1.PauseQueueRequest]) (*connect.Response[conveyorv1.QueueInfo], error) {
	return a.setPaused(ctx, req.Msg.GetQueue(), true)
}

func (a *adminService) ResumeQueue(ctx context.Context, req *connect.Request[conveyorv1.ResumeQueueRequest]) (*connect.Response[conveyorv1.QueueInfo], error) {
	return a.setPaused(ctx, req.Msg.GetQueue(), false)
}

// DeleteQueue forgets an empty queue and drops its metrics.
func (a *adminService) DeleteQueue(ctx context.Context, req *connect.Request[conveyorv1.DeleteQueueRequest]) (*connect.Response[conveyorv1.DeleteQueueResponse], error) {
	name := req.Msg.GetQueue()
	if err := checkQueueName("queue", name); err != nil {
		return nil, err
	}
	if err := a.broker.DeleteQueue(ctx, name); err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	a.server.metrics.queueDeleted(name)
	a.server.push.Refresh()
	return connect.NewResponse(&conveyorv1.DeleteQueueResponse{}), nil
}

func (a *adminService) GetQueueConfig(ctx context.Context, req *connect.Request[conveyorv1.GetQueueConfigRequest]) (*connect.Response[conveyorv1.QueueConfig], error) {
	name := req.Msg.GetQueue()
	if err := checkQueueName("queue", name); err != nil {
		return nil, err
	}
	q, err := a.broker.Queue(ctx, name)
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	if req.Msg.GetStored() {
		return connect.NewResponse(storedConfig(name, q.Config)), nil
	}
	return connect.NewResponse(a.effectiveConfig(name, q.Config)), nil
}

func (a *adminService) UpdateQueueConfig(ctx context.Context, req *connect.Request[conveyorv1.UpdateQueueConfigRequest]) (*connect.Response[conveyorv1.QueueConfig], error) {
	c := req.Msg.GetConfig()
	if err := checkQueueName("config.queue", c.GetQueue()); err != nil {
		return nil, err
	}
	cfg, err := brokerQueueConfig(c, len(a.server.pushKeys) == 0)
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	update, err := configUpdate(cfg, req.Msg.GetUpdateMask().GetPaths())
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, err)
	}
	q, err := a.broker.UpdateQueueConfig(ctx, c.GetQueue(), update)
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	a.server.push.Refresh()
	return connect.NewResponse(a.effectiveConfig(q.Name, q.Config)), nil
}

// configSettings are the settings an update_mask may name, each with how
// it copies its value from the requested configuration to the stored one.
var configSettings = map[string]func(dst *broker.QueueConfig, src broker.QueueConfig){
	"concurrency_limit":         func(d *broker.QueueConfig, s broker.QueueConfig) { d.ConcurrencyLimit = s.ConcurrencyLimit },
	"max_active":                func(d *broker.QueueConfig, s broker.QueueConfig) { d.MaxActive = s.MaxActive },
	"rate_limit.per_second":     func(d *broker.QueueConfig, s broker.QueueConfig) { d.RatePerSecond = s.RatePerSecond },
	"rate_limit.burst":          func(d *broker.QueueConfig, s broker.QueueConfig) { d.RateBurst = s.RateBurst },
	"group_policy.max_size":     func(d *broker.QueueConfig, s broker.QueueConfig) { d.Group.MaxSize = s.Group.MaxSize },
	"group_policy.max_delay":    func(d *broker.QueueConfig, s broker.QueueConfig) { d.Group.MaxDelay = s.Group.MaxDelay },
	"group_policy.grace_period": func(d *broker.QueueConfig, s broker.QueueConfig) { d.Group.GracePeriod = s.Group.GracePeriod },
	"rate_limit": func(d *broker.QueueConfig, s broker.QueueConfig) {
		d.RatePerSecond, d.RateBurst = s.RatePerSecond, s.RateBurst
	},
	"group_policy": func(d *broker.QueueConfig, s broker.QueueConfig) { d.Group = s.Group },
	"max_waiting":  func(d *broker.QueueConfig, s broker.QueueConfig) { d.MaxWaiting = s.MaxWaiting },
	"push":         func(d *broker.QueueConfig, s broker.QueueConfig) { d.Push = s.Push },
	"push.url":     func(d *broker.QueueConfig, s broker.QueueConfig) { d.Push.URL = s.Push.URL },
	"push.concurrency": func(d *broker.QueueConfig, s broker.QueueConfig) {
		d.Push.Concurrency = s.Push.Concurrency
	},
	"push.timeout": func(d *broker.QueueConfig, s broker.QueueConfig) { d.Push.Timeout = s.Push.Timeout },
}

// configUpdate is how UpdateQueueConfig changes the stored configuration
// to cfg: all of it, or only the settings the mask's paths name.
func configUpdate(cfg broker.QueueConfig, paths []string) (func(*broker.QueueConfig), error) {
	if len(paths) == 0 {
		return func(c *broker.QueueConfig) { *c = cfg }, nil
	}
	set := make([]func(*broker.QueueConfig, broker.QueueConfig), len(paths))
	for i, p := range paths {
		if set[i] = configSettings[p]; set[i] == nil {
			known := slices.Sorted(maps.Keys(configSettings))
			return nil, fmt.Errorf("update_mask.paths[%d]: %q is not a setting of QueueConfig; the settings are %s", i, wire.TruncateUTF8(p, wire.MaxEchoBytes), strings.Join(known, ", "))
		}
	}
	return func(c *broker.QueueConfig) {
		for _, f := range set {
			f(c, cfg)
		}
	}, nil
}

// effectiveConfig is a queue's configuration with every default applied:
// what it does, rather than what was stored (zeros).
func (a *adminService) effectiveConfig(name string, c broker.QueueConfig) *conveyorv1.QueueConfig {
	out := &conveyorv1.QueueConfig{
		Queue:            name,
		ConcurrencyLimit: max(c.ConcurrencyLimit, 1),
		MaxActive:        c.MaxActive,
		RateLimit:        &conveyorv1.RateLimit{PerSecond: c.RatePerSecond, Burst: c.RateBurst},
		MaxWaiting:       c.MaxWaiting,
	}
	if c.RatePerSecond > 0 && c.RateBurst == 0 {
		out.RateLimit.Burst = c.RatePerSecond
	}
	g := c.Group.WithDefaults(a.server.cfg.GroupPolicy)
	out.GroupPolicy = &conveyorv1.GroupPolicy{MaxSize: g.MaxSize,
		MaxDelay: durationpb.New(g.MaxDelay), GracePeriod: durationpb.New(g.GracePeriod)}
	p := push.SettingsOf(c.Push)
	out.Push = &conveyorv1.PushEndpoint{Url: p.URL, Concurrency: int32(p.Concurrency), Timeout: durationpb.New(p.Timeout)}
	return out
}

// storedConfig is c as the queue stores it: a zero field where the queue
// follows the default, so that writing it back changes nothing.
func storedConfig(name string, c broker.QueueConfig) *conveyorv1.QueueConfig {
	out := &conveyorv1.QueueConfig{
		Queue:            name,
		ConcurrencyLimit: c.ConcurrencyLimit,
		MaxActive:        c.MaxActive,
		RateLimit:        &conveyorv1.RateLimit{PerSecond: c.RatePerSecond, Burst: c.RateBurst},
		GroupPolicy:      &conveyorv1.GroupPolicy{MaxSize: c.Group.MaxSize},
		MaxWaiting:       c.MaxWaiting,
	}
	if c.Group.MaxDelay > 0 {
		out.GroupPolicy.MaxDelay = durationpb.New(c.Group.MaxDelay)
	}
	if c.Group.GracePeriod > 0 {
		out.GroupPolicy.GracePeriod = durationpb.New(c.Group.GracePeriod)
	}
	if c.Push != (broker.PushEndpoint{}) {
		out.Push = &conveyorv1.PushEndpoint{Url: c.Push.URL, Concurrency: c.Push.Concurrency}
		if c.Push.Timeout > 0 {
			out.Push.Timeout = durationpb.New(c.Push.Timeout)
		}
	}
	return out
}

// brokerQueueConfig validates a wire QueueConfig; each bad field is named.
// A push URL must be loopback unless the server signs its pushes
// (pushLoopbackOnly false).
func brokerQueueConfig(c *conveyorv1.QueueConfig, pushLoopbackOnly bool) (broker.QueueConfig, error) {
	ints := []struct {
		name string
		v    int32
	}{
		{"config.concurrency_limit", c.GetConcurrencyLimit()}, {"config.max_active", c.GetMaxActive()},
		{"config.rate_limit.per_second", c.GetRateLimit().GetPerSecond()}, {"config.rate_limit.burst", c.GetRateLimit().GetBurst()},
	}
	for _, f := range ints {
		if f.v < 0 || f.v > MaxQueueLimit {
			return broker.QueueConfig{}, fmt.Errorf("%s must be 0..%d (0 means the default), got %d", f.name, MaxQueueLimit, f.v)
		}
	}
	if n := c.GetMaxWaiting(); n < 0 || n > MaxQueueWaiting {
		return broker.QueueConfig{}, fmt.Errorf("config.max_waiting must be 0..%d (0 means no bound), got %d", MaxQueueWaiting, n)
	}
	g := c.GetGroupPolicy()
	if n := g.GetMaxSize(); n < 0 || n > MaxGroupSize {
		return broker.QueueConfig{}, fmt.Errorf("config.group_policy.max_size must be 0..%d (0 means the server's default), got %d", MaxGroupSize, n)
	}
	durs := []struct {
		name string
		d    *durationpb.Duration
	}{{"config.group_policy.max_delay", g.GetMaxDelay()}, {"config.group_policy.grace_period", g.GetGracePeriod()}}
	for _, f := range durs {
		if f.d == nil {
			continue
		}
		if err := f.d.CheckValid(); err != nil || f.d.AsDuration() < 0 || f.d.AsDuration() > MaxGroupDelay {
			return broker.QueueConfig{}, fmt.Errorf("%s must be 0..%s (0 means the server's default), got %s", f.name, MaxGroupDelay, f.d.AsDuration())
		}
	}
	pe, err := pushEndpoint(c.GetPush())
	if err != nil {
		return broker.QueueConfig{}, err
	}
	if err := push.Check("config.push", pe, pushLoopbackOnly); err != nil {
		return broker.QueueConfig{}, err
	}
	return broker.QueueConfig{
		Push:             pe,
		ConcurrencyLimit: c.GetConcurrencyLimit(),
		MaxActive:        c.GetMaxActive(),
		RatePerSecond:    c.GetRateLimit().GetPerSecond(),
		RateBurst:        c.GetRateLimit().GetBurst(),
		Group: broker.GroupPolicy{MaxSize: g.GetMaxSize(), MaxDelay: g.GetMaxDelay().AsDuration(),
			GracePeriod: g.GetGracePeriod().AsDuration()},
		MaxWaiting: c.GetMaxWaiting(),
	}, nil
}

// pushEndpoint reads a wire PushEndpoint (nil: none).
func pushEndpoint(p *conveyorv1.PushEndpoint) (broker.PushEndpoint, error) {
	e := broker.PushEndpoint{URL: p.GetUrl(), Concurrency: p.GetConcurrency()}
	if d := p.GetTimeout(); d != nil {
		if err := d.CheckValid(); err != nil {
			return e, fmt.Errorf("config.push.timeout: %w", err)
		}
		e.Timeout = d.AsDuration()
	}
	return e, nil
}
