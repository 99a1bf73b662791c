package main

import (
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"
	"google.golang.org/protobuf/types/known/durationpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// queueConfigCmd is `conveyor queue config QUEUE [--flag VALUE ...]`: with
// no flag it shows the configuration; with some, it reads the current one,
// changes what the flags say and writes it back, so unspecified settings
// keep their values. A flag set to 0 restores that setting's default.
//
// The flags have no env tags: CONVEYOR_GROUP_MAX_SIZE and its kin are the
// server's defaults, not a queue's.
type queueConfigCmd struct {
	clientFlags

	Queue            string         `arg:"" help:"Queue name."`
	ConcurrencyLimit *int32         `name:"concurrency-limit" placeholder:"N" help:"Tasks sharing one concurrency key that may be active at once (0: the default, 1)."`
	MaxActive        *int32         `name:"max-active" placeholder:"N" help:"Tasks of the queue that may be active at once (0: no limit)."`
	Rate             *int32         `placeholder:"N" help:"Dispatches per second (0: no limit)."`
	Burst            *int32         `placeholder:"N" help:"Token-bucket size: dispatches that may go at once after a quiet spell (0: the rate)."`
	GroupMaxSize     *int32         `name:"group-max-size" placeholder:"N" help:"A group fires once it holds this many tasks (0: the server's default)."`
	GroupMaxDelay    *time.Duration `name:"group-max-delay" placeholder:"DURATION" help:"A group fires this long after its first task (0: the server's default)."`
	GroupGracePeriod *time.Duration `name:"group-grace-period" placeholder:"DURATION" help:"A group fires this long after its latest task (0: the server's default)."`
}

// Run shows or updates the configuration and prints the result.
func (c *queueConfigCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	// A change reads the configuration as stored, so that the settings it
	// does not name keep following their defaults; a plain show reads the
	// effective one.
	res, err := cn.admin.GetQueueConfig(ctx, connect.NewRequest(&conveyorv1.GetQueueConfigRequest{Queue: c.Queue, Stored: c.changes()}))
	if err != nil {
		return err
	}
	cfg := res.Msg
	if c.changes() {
		c.apply(cfg)
		res, err = cn.admin.UpdateQueueConfig(ctx, connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{Config: cfg}))
		if err != nil {
			return err
		}
		cfg = res.Msg
	}
	return c.printConfig(k.Stdout, cfg)
}

func (c *queueConfigCmd) changes() bool {
	return c.ConcurrencyLimit != nil || c.MaxActive != nil || c.Rate != nil || c.Burst != nil ||
		c.GroupMaxSize != nil || c.GroupMaxDelay != nil || c.GroupGracePeriod != nil
}

// apply sets the flags given on cfg, the configuration as stored.
func (c *queueConfigCmd) apply(cfg *conveyorv1.QueueConfig) {
	set := func(dst *int32, v *int32) {
		if v != nil {
			*dst = *v
		}
	}
	setDuration := func(dst **durationpb.Duration, v *time.Duration) {
		if v != nil {
			*dst = durationpb.New(*v)
		}
	}
	if cfg.RateLimit == nil {
		cfg.RateLimit = &conveyorv1.RateLimit{}
	}
	if cfg.GroupPolicy == nil {
		cfg.GroupPolicy = &conveyorv1.GroupPolicy{}
	}
	set(&cfg.ConcurrencyLimit, c.ConcurrencyLimit)
	set(&cfg.MaxActive, c.MaxActive)
	set(&cfg.RateLimit.PerSecond, c.Rate)
	set(&cfg.RateLimit.Burst, c.Burst)
	set(&cfg.GroupPolicy.MaxSize, c.GroupMaxSize)
	setDuration(&cfg.GroupPolicy.MaxDelay, c.GroupMaxDelay)
	setDuration(&cfg.GroupPolicy.GracePeriod, c.GroupGracePeriod)
}

func (c *queueConfigCmd) printConfig(w io.Writer, cfg *conveyorv1.QueueConfig) error {
	if c.JSON {
		return writeJSON(w, cfg)
	}
	var l listing
	l.add("queue", cfg.GetQueue())
	l.add("concurrency_limit", fmt.Sprint(cfg.GetConcurrencyLimit()))
	l.add("max_active", limit(cfg.GetMaxActive()))
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
	return l.write(w)
}

// limit is a cap for people: 0 means none.
func limit(n int32) string {
	if n == 0 {
		return "none"
	}
	return fmt.Sprint(n)
}
