package main

import (
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
)

// cronHistoryCmd is `conveyor cron history ID`: the tasks an entry
// enqueued that the server still keeps (finished ones until their
// retention ends), the latest last, with each fire's scheduled time.
//
// The server keeps no list of fires beyond the entry's last one: each
// fired task carries the entry's id and its fire time in its metadata
// (conveyor-cron-id, conveyor-cron-fire), so the history is a listing of
// the entry's queue filtered by them. It reads every task of the entry's
// type in that queue: a command for an operator, not a hot path.
type cronHistoryCmd struct {
	clientFlags

	ID   string `arg:"" help:"Cron entry id."`
	Last int    `default:"20" help:"Show the latest N fires (0: every one still kept)."`
}

// Run lists the fires.
func (c *cronHistoryCmd) Run(k *kong.Context) error {
	if err := checkLast(c.Last); err != nil {
		return err
	}
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	entry, err := cn.admin.GetCron(ctx, connect.NewRequest(&conveyorv1.GetCronRequest{Id: c.ID}))
	if err != nil {
		return err
	}
	var fired []*conveyorv1.TaskInfo
	req := &conveyorv1.ListTasksRequest{Queue: entry.Msg.GetQueue(), Type: entry.Msg.GetType(), Search: c.ID, PageSize: maxListPage}
	for {
		res, err := cn.admin.ListTasks(ctx, connect.NewRequest(req))
		if err != nil {
			return err
		}
		for _, t := range res.Msg.GetTasks() {
			if t.GetMetadata()[server.CronIDKey] == c.ID {
				fired = append(fired, t)
			}
		}
		if req.PageToken = res.Msg.GetNextPageToken(); req.PageToken == "" {
			break
		}
	}
	// By fire time: the RFC 3339 UTC stamps sort as text.
	slices.SortStableFunc(fired, func(a, b *conveyorv1.TaskInfo) int {
		return strings.Compare(a.GetMetadata()[server.CronFireKey], b.GetMetadata()[server.CronFireKey])
	})
	fired = latest(fired, c.Last)
	if c.JSON {
		return writeJSONList(k.Stdout, fired)
	}
	if len(fired) == 0 {
		return writef(k.Stdout, "cron entry %s has no fired task kept (finished tasks are purged after their retention)\n", c.ID)
	}
	t := newTable(k.Stdout, "FIRE", "TASK", "STATE", "RETRIED", "ENDED", "LAST ERROR")
	for _, task := range fired {
		ended := "-"
		if task.GetCompletedAt() != nil {
			ended = showAgo(task.GetCompletedAt())
		}
		state := stateName(task.GetState())
		t.styledRow([]style{styleNone, styleNone, stateStyle(state)}, task.GetMetadata()[server.CronFireKey], task.GetId(), state,
			fmt.Sprintf("%d/%d", task.GetRetried(), task.GetMaxRetry()), ended, orDash(firstLine(task.GetLastError(), 60)))
	}
	return t.flush()
}
