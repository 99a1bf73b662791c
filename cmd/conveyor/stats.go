package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// statsCmd is `conveyor stats`: a live view of every queue's depth per
// state and its rates, refreshed every --interval until Ctrl-C.
type statsCmd struct {
	clientFlags

	Interval time.Duration `default:"1s" help:"Time between two frames."`
	Once     bool          `help:"Print one frame and exit (without rates: they need two samples)."`
	Count    int           `placeholder:"N" help:"Exit after N frames (0: until Ctrl-C)."`
}

// statsSample is one ListQueues answer and when it came.
type statsSample struct {
	at     time.Time
	queues []*conveyorv1.QueueInfo
}

// Run samples the queues once per interval and prints a frame for each: on
// a terminal it redraws the screen, elsewhere it appends. With --json each
// frame is one line of JSON (a stream reads best line by line).
func (c *statsCmd) Run(k *kong.Context) error {
	if c.Interval <= 0 {
		return usageErrorf("--interval must be positive, got %s", c.Interval)
	}
	if c.Count < 0 {
		return usageErrorf("--count must be 0 (until Ctrl-C) or more, got %d", c.Count)
	}
	if c.Once {
		c.Count = 1
	}
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	tty := isTerminal(k.Stdout) && !c.JSON
	tick := time.NewTicker(c.Interval)
	defer tick.Stop()
	var prev *statsSample
	for n := 1; ; n++ {
		res, err := cn.admin.ListQueues(ctx, connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
		if err != nil {
			if ctx.Err() != nil {
				return nil // Ctrl-C: the normal way out
			}
			return err
		}
		cur := &statsSample{at: time.Now(), queues: res.Msg.GetQueues()}
		if err := c.frame(k.Stdout, tty, cn.base, prev, cur); err != nil {
			return err
		}
		if c.Count > 0 && n >= c.Count {
			return nil
		}
		prev = cur
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (c *statsCmd) frame(w io.Writer, tty bool, addr string, prev, cur *statsSample) error {
	if c.JSON {
		b, err := json.Marshal(statsJSON(prev, cur))
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", jsonSafe(b))
		return err
	}
	var b strings.Builder
	if tty {
		b.WriteString("\x1b[H\x1b[2J") // home the cursor, clear the screen
	}
	_ = writef(&b, "conveyor stats  %s  %s", addr, cur.at.Local().Format(time.RFC3339))
	if c.Count != 1 {
		fmt.Fprintf(&b, "  (every %s; Ctrl-C to stop)", c.Interval)
	}
	b.WriteString("\n\n")
	if err := statsTable(&b, prev, cur); err != nil {
		return err
	}
	if !tty && c.Count != 1 {
		b.WriteString("\n") // frames appended to a log or pipe stay apart
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// statsTable is one frame's table: depths now, and rates over the time
// since prev ("-" on the first frame and for a queue new since).
func statsTable(w io.Writer, prev, cur *statsSample) error {
	t := newTable(w, "QUEUE", "PAUSED", "PENDING", "ACTIVE", "SCHEDULED", "RETRY", "AGGREGATING", "BLOCKED",
		"ARCHIVED", "ENQUEUED/S", "COMPLETED/S", "FAILED/S")
	for _, q := range cur.queues {
		r := rates(prev, cur, q)
		t.row(q.GetName(), yesNo(q.GetPaused()), count(q.GetPending()), count(q.GetActive()), count(q.GetScheduled()),
			count(q.GetRetry()), count(q.GetAggregating()), count(q.GetBlocked()), count(q.GetArchived()),
			showRate(r, 0), showRate(r, 1), showRate(r, 2))
	}
	return t.flush()
}

// rates are q's enqueued, completed and failed per second since prev: the
// deltas of its persistent counters (completed is processed less failed:
// processed counts every attempt a worker gave a verdict on). nil when
// prev lacks the queue, or a counter went back (another server's file).
func rates(prev, cur *statsSample, q *conveyorv1.QueueInfo) []float64 {
	if prev == nil {
		return nil
	}
	dt := cur.at.Sub(prev.at).Seconds()
	for _, p := range prev.queues {
		if p.GetName() != q.GetName() {
			continue
		}
		enq := q.GetEnqueued() - p.GetEnqueued()
		fail := q.GetFailed() - p.GetFailed()
		done := (q.GetProcessed() - q.GetFailed()) - (p.GetProcessed() - p.GetFailed())
		if dt <= 0 || enq < 0 || fail < 0 || done < 0 {
			return nil
		}
		return []float64{float64(enq) / dt, float64(done) / dt, float64(fail) / dt}
	}
	return nil
}

func showRate(r []float64, i int) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", r[i])
}

// statsFrameJSON is one frame for scripts. Rates are null where the table
// shows "-".
type statsFrameJSON struct {
	At     time.Time        `json:"at"`
	Queues []statsQueueJSON `json:"queues"`
}

type statsQueueJSON struct {
	Name               string           `json:"name"`
	Paused             bool             `json:"paused"`
	Counts             map[string]int64 `json:"counts"`
	EnqueuedPerSecond  *float64         `json:"enqueuedPerSecond"`
	CompletedPerSecond *float64         `json:"completedPerSecond"`
	FailedPerSecond    *float64         `json:"failedPerSecond"`
}

func statsJSON(prev, cur *statsSample) statsFrameJSON {
	f := statsFrameJSON{At: cur.at.UTC(), Queues: []statsQueueJSON{}}
	for _, q := range cur.queues {
		sq := statsQueueJSON{Name: q.GetName(), Paused: q.GetPaused(), Counts: map[string]int64{
			"scheduled": q.GetScheduled(), "pending": q.GetPending(), "active": q.GetActive(),
			"retry": q.GetRetry(), "completed": q.GetCompleted(), "archived": q.GetArchived(),
			"canceled": q.GetCanceled(), "aggregating": q.GetAggregating(), "blocked": q.GetBlocked(),
		}}
		if r := rates(prev, cur, q); r != nil {
			sq.EnqueuedPerSecond, sq.CompletedPerSecond, sq.FailedPerSecond = &r[0], &r[1], &r[2]
		}
		f.Queues = append(f.Queues, sq)
	}
	return f
}
