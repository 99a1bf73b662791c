package main

import (
	"fmt"
	"io"
	"strings"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// queueCmd groups the commands on queues, one file each (queue_*.go).
type queueCmd struct {
	Ls      queueLsCmd      `cmd:"" help:"List the queues: tasks per state, totals, paused or not."`
	Pause   queuePauseCmd   `cmd:"" help:"Stop dispatching a queue's tasks (enqueues still succeed)."`
	Resume  queueResumeCmd  `cmd:"" help:"Dispatch a paused queue's tasks again."`
	Config  queueConfigCmd  `cmd:"" help:"Show a queue's limits and group policy, or change some of them."`
	Stats   queueStatsCmd   `cmd:"" help:"Show how far behind a queue is (its oldest ready task's wait) and how long its tasks wait and run (p50, p95)."`
	History queueHistoryCmd `cmd:"" help:"Show what a queue (or every queue) did per minute over the last day, or per day (--days) over 90 days: enqueued, completed, failed."`
	Delete  queueDeleteCmd  `cmd:"" help:"Forget an empty queue: its pause flag, configuration and totals (refused while it holds tasks or a cron entry uses it)."`
}

// printQueue writes one queue: JSON with --json, else a one-row table.
func (f *clientFlags) printQueue(w io.Writer, q *conveyorv1.QueueInfo) error {
	if f.JSON {
		return writeJSON(w, q)
	}
	return queueTable(w, []*conveyorv1.QueueInfo{q}, false)
}

// queueTable writes the queues as a table, one row each: every count with
// wide, else those an operator watches, so that a queue name of up to a
// dozen characters fits 100 columns (the types without a worker cut to
// unservedWidth).
func queueTable(w io.Writer, qs []*conveyorv1.QueueInfo, wide bool) error {
	if !wide {
		return narrowQueueTable(w, qs)
	}
	t := newTable(w, "QUEUE", "PAUSED", "SCHEDULED", "PENDING", "ACTIVE", "RETRY", "AGGREGATING", "BLOCKED",
		"COMPLETED", "ARCHIVED", "CANCELED", "ENQUEUED", "PROCESSED", "FAILED", "NO WORKER FOR")
	for _, q := range qs {
		t.styledRow(pausedStyle(q.GetPaused()), q.GetName(), yesNo(q.GetPaused()), count(q.GetScheduled()), count(q.GetPending()), count(q.GetActive()),
			count(q.GetRetry()), count(q.GetAggregating()), count(q.GetBlocked()), count(q.GetCompleted()),
			count(q.GetArchived()), count(q.GetCanceled()), count(q.GetEnqueued()), count(q.GetProcessed()),
			count(q.GetFailed()), orDash(strings.Join(q.GetUnservedTypes(), ",")))
	}
	return t.flush()
}

// unservedWidth bounds the NO WORKER FOR cell of the narrow table.
const unservedWidth = 24

func narrowQueueTable(w io.Writer, qs []*conveyorv1.QueueInfo) error {
	t := newTable(w, "QUEUE", "PAUSED", "PENDING", "ACTIVE", "SCHEDULED", "RETRY", "ARCHIVED", "FAILED", "NO WORKER FOR")
	for _, q := range qs {
		t.styledRow(pausedStyle(q.GetPaused()), q.GetName(), yesNo(q.GetPaused()), count(q.GetPending()), count(q.GetActive()), count(q.GetScheduled()),
			count(q.GetRetry()), count(q.GetArchived()), count(q.GetFailed()),
			orDash(firstLine(strings.Join(q.GetUnservedTypes(), ","), unservedWidth)))
	}
	return t.flush()
}

func count(n int64) string { return fmt.Sprint(n) }

// pausedStyle marks a paused queue's PAUSED cell.
func pausedStyle(paused bool) []style {
	if paused {
		return []style{styleNone, styleWarn}
	}
	return nil
}
