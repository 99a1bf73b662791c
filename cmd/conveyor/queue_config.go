package main

import (
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// queueConfigCmd is `conveyor queue config QUEUE [--flag VALUE ...]`: with
// no flag it shows the configuration; with some, it sends only the
// settings the flags name (UpdateQueueConfig's update_mask), which the
// server changes in one step, so the other settings keep their values even
// while someone else changes them. A flag set to 0 restores that
// setting's default.
//
// The flags have no env tags: CONVEYOR_GROUP_MAX_SIZE and its kin are the
// server's defaults, not a queue's.
type queueConfigCmd struct {
	clientFlags

	Queue            string         `arg:"" complete:"queue" help:"Queue name."`
	ConcurrencyLimit *int32         `name:"concurrency-limit" placeholder:"N" help:"Tasks sharing one concurrency key that may be active at once (0: the default, 1)."`
	MaxActive        *int32         `name:"max-active" placeholder:"N" help:"Tasks of the queue that may be active at once (0: no limit)."`
	Rate             *int32         `placeholder:"N" help:"Dispatches per second (0: no limit)."`
	Burst            *int32         `placeholder:"N" help:"Token-bucket size: dispatches that may go at once after a quiet spell (0: the rate)."`
	GroupMaxSize     *int32         `name:"group-max-size" placeholder:"N" help:"A group fires once it holds this many tasks (0: the server's default)."`
	GroupMaxDelay    *time.Duration `name:"group-max-delay" placeholder:"DURATION" help:"A group fires this long after its first task (0: the server's default)."`
	GroupGracePeriod *time.Duration `name:"group-grace-period" placeholder:"DURATION" help:"A group fires this long after its latest task (0: the server's default)."`
	MaxWaiting       *int64         `name:"max-waiting" placeholder:"N" help:"Tasks the queue may hold waiting to run (scheduled, pending, retry, aggregating, blocked); a producer past it waits for room, up to 5s, then is refused (0: no bound)."`
	PushURL          *string        `name:"push-url" placeholder:"URL" help:"HTTP endpoint the server POSTs the queue's tasks to, signed (docs/push.md); \"\" removes it. Without --push-secret on the server, loopback URLs only."`
	PushConcurrency  *int32         `name:"push-concurrency" placeholder:"N" help:"Invocations of the push endpoint in flight at once (0: the default, 10)."`
	PushTimeout      *time.Duration `name:"push-timeout" placeholder:"DURATION" help:"Longest one invocation of the push endpoint may take (0: the default, 30s); the task's timeout and deadline shorten it."`
}

// Run shows or updates the configuration and prints the result.
func (c *queueConfigCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	var res *connect.Response[conveyorv1.QueueConfig]
	if cfg, mask := c.update(); len(mask.GetPaths()) > 0 {
		res, err = cn.admin.UpdateQueueConfig(ctx, connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{Config: cfg, UpdateMask: mask}))
	} else {
		res, err = cn.admin.GetQueueConfig(ctx, connect.NewRequest(&conveyorv1.GetQueueConfigRequest{Queue: c.Queue}))
	}
	if err != nil {
		return err
	}
	return c.printConfig(k.Stdout, res.Msg)
}

// update is the change the flags ask for: the settings they give, and
// the mask that names them (none: a plain show).
func (c *queueConfigCmd) update() (*conveyorv1.QueueConfig, *fieldmaskpb.FieldMask) {
	cfg := &conveyorv1.QueueConfig{Queue: c.Queue, RateLimit: &conveyorv1.RateLimit{}, GroupPolicy: &conveyorv1.GroupPolicy{},
		Push: &conveyorv1.PushEndpoint{}}
	mask := &fieldmaskpb.FieldMask{}
	set := func(path string, dst *int32, v *int32) {
		if v != nil {
			*dst = *v
			mask.Paths = append(mask.Paths, path)
		}
	}
	setDuration := func(path string, dst **durationpb.Duration, v *time.Duration) {
		if v != nil {
			*dst = durationpb.New(*v)
			mask.Paths = append(mask.Paths, path)
		}
	}
	set("concurrency_limit", &cfg.ConcurrencyLimit, c.ConcurrencyLimit)
	set("max_active", &cfg.MaxActive, c.MaxActive)
	set("rate_limit.per_second", &cfg.RateLimit.PerSecond, c.Rate)
	set("rate_limit.burst", &cfg.RateLimit.Burst, c.Burst)
	set("group_policy.max_size", &cfg.GroupPolicy.MaxSize, c.GroupMaxSize)
	setDuration("group_policy.max_delay", &cfg.GroupPolicy.MaxDelay, c.GroupMaxDelay)
	setDuration("group_policy.grace_period", &cfg.GroupPolicy.GracePeriod, c.GroupGracePeriod)
	if c.MaxWaiting != nil {
		cfg.MaxWaiting = *c.MaxWaiting
		mask.Paths = append(mask.Paths, "max_waiting")
	}
	if c.PushURL != nil {
		cfg.Push.Url = *c.PushURL
		mask.Paths = append(mask.Paths, "push.url")
	}
	set("push.concurrency", &cfg.Push.Concurrency, c.PushConcurrency)
	setDuration("push.timeout", &cfg.Push.Timeout, c.PushTimeout)
	return cfg, mask
}

func (c *queueConfigCmd) printConfig(w io.Writer, cfg *conveyorv1.QueueConfig) error {
	if c.JSON {
		return writeJSON(w, cfg)
	}
	var l listing
	l.add("queue", cfg.GetQueue())
	l.add("concurrency_limit", fmt.Sprint(cfg.GetConcurrencyLimit()))
	l.add("max_active", limit(cfg.GetMaxActive()))
	l.add("max_waiting", limit(cfg.GetMaxWaiting()))
	if r := cfg.GetRateLimit(); r.GetPerSecond() > 0 {
		l.add("rate_limit", fmt.Sprintf("%d/s, burst %d", r.GetPerSecond(), r.GetBurst()))
	} else {
		l.add("rate_limit", "none")
	}
	g := cfg.GetGroupPolicy()
	if g == nil {
		g = &conveyorv1.GroupPolicy{}
	}
	l.add("group_max_size", fmt.Sprint(g.GetMaxSize()))
	l.add("group_max_delay", showDuration(g.GetMaxDelay()))
	l.add("group_grace_period", showDuration(g.GetGracePeriod()))
	if p := cfg.GetPush(); p.GetUrl() != "" {
		l.add("push", fmt.Sprintf("%s, concurrency %d, timeout %s", p.GetUrl(), p.GetConcurrency(), showDuration(p.GetTimeout())))
	} else {
		l.add("push", "none")
	}
	return l.write(w)
}

// limit is a cap for people: 0 means none.
func limit[N int32 | int64](n N) string {
	if n == 0 {
		return "none"
	}
	return fmt.Sprint(n)
}
