package main

import (
	"fmt"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// queueHistoryCmd is `conveyor queue history [QUEUE]`: what a queue, or
// every queue, did per minute or per day, from the history the server
// keeps.
type queueHistoryCmd struct {
	clientFlags

	Queue string `arg:"" optional:"" help:"Queue name (default: every queue, summed)."`
	Days  bool   `help:"One row per day over the last 90 days (default: one per minute over the last day)."`
	Last  int    `default:"30" help:"Show the latest N minutes or days (0: all the server keeps)."`
}

// Run prints the points, the latest last.
func (c *queueHistoryCmd) Run(k *kong.Context) error {
	if err := checkLast(c.Last); err != nil {
		return err
	}
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	res := conveyorv1.HistoryResolution_HISTORY_RESOLUTION_MINUTE
	if c.Days {
		res = conveyorv1.HistoryResolution_HISTORY_RESOLUTION_DAY
	}
	h, err := cn.admin.GetQueueHistory(ctx, connect.NewRequest(&conveyorv1.GetQueueHistoryRequest{Queue: c.Queue, Resolution: res}))
	if err != nil {
		return err
	}
	points := h.Msg.GetPoints()
	points = latest(points, c.Last)
	if c.JSON {
		return writeJSONList(k.Stdout, points)
	}
	if len(points) == 0 {
		return writef(k.Stdout, "no queues yet: their history starts with their first task\n")
	}
	layout, what := "2006-01-02 15:04", "MINUTE"
	if c.Days {
		layout, what = "2006-01-02", "DAY (UTC)"
	}
	t := newTable(k.Stdout, what, "ENQUEUED", "COMPLETED", "FAILED")
	for _, p := range points {
		at := p.GetStart().AsTime().Local()
		if c.Days {
			at = p.GetStart().AsTime().UTC()
		}
		t.row(at.Format(layout), count(p.GetEnqueued()), count(p.GetCompleted()), count(p.GetFailed()))
	}
	return t.flush()
}

// checkLast refuses a negative --last.
func checkLast(n int) error {
	if n < 0 {
		return fmt.Errorf("--last %d: want 0 (all) or more", n)
	}
	return nil
}

// latest keeps the last n of xs, or all of them when n is 0 (--last).
func latest[T any](xs []T, n int) []T {
	if n > 0 && len(xs) > n {
		return xs[len(xs)-n:]
	}
	return xs
}
