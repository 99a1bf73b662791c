package main

import (
	"time"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"
	"google.golang.org/protobuf/types/known/durationpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// queueStatsCmd is `conveyor queue stats QUEUE`: how far behind a queue
// is, and how long its tasks wait and run.
type queueStatsCmd struct {
	clientFlags

	Queue string `arg:"" help:"Queue name."`
}

// Run prints the latency, then a table of durations.
func (c *queueStatsCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	res, err := cn.admin.GetQueueStats(ctx, connect.NewRequest(&conveyorv1.GetQueueStatsRequest{Queue: c.Queue}))
	if err != nil {
		return err
	}
	st := res.Msg
	if c.JSON {
		return writeJSON(k.Stdout, st)
	}
	latency := "none (nothing ready waits)"
	if st.GetOldestReadyAt() != nil {
		latency = roundedDuration(st.GetLatency()) + " (the oldest ready task became ready " + showAgo(st.GetOldestReadyAt()) + ")"
	}
	if err := writef(k.Stdout, "latency: %s\ndurations observed by this server since %s:\n", latency, showAgo(st.GetObservedSince())); err != nil {
		return err
	}
	t := newTable(k.Stdout, "WHAT", "COUNT", "P50", "P95")
	t.row("wait (every type)", count(st.GetWait().GetCount()), roundedDuration(st.GetWait().GetP50()), roundedDuration(st.GetWait().GetP95()))
	for _, ty := range st.GetTypes() {
		t.row("run "+ty.GetType(), count(ty.GetRun().GetCount()), roundedDuration(ty.GetRun().GetP50()), roundedDuration(ty.GetRun().GetP95()))
	}
	return t.flush()
}

// roundedDuration rounds a duration for reading: to the millisecond below a
// minute, to the second above.
func roundedDuration(d *durationpb.Duration) string {
	if d == nil {
		return "-"
	}
	v := d.AsDuration()
	if v >= time.Minute {
		return v.Round(time.Second).String()
	}
	if v >= time.Millisecond {
		return v.Round(time.Millisecond).String()
	}
	return v.String()
}
