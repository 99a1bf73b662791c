package main

import (
	"context"
	"fmt"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// taskLsCmd is `conveyor task ls [--queue Q] [filters]`. It pages through
// ListTasks itself: --limit bounds how many tasks it prints (the last page
// is asked to end there, so the page token it reports continues exactly
// after the last task printed), --all prints every one. Without --queue it
// lists every queue's tasks, merged in id order (task_ls_all.go).
type taskLsCmd struct {
	clientFlags

	Queue     string `placeholder:"QUEUE" help:"Only this queue's tasks (default: every queue's, merged in id order)."`
	State     string `default:"all" enum:"all,${states}" placeholder:"STATE" help:"Only tasks in this state: all (the default), ${state_list}."`
	Type      string `placeholder:"TYPE" help:"Only tasks of this type (exact match)."`
	Search    string `placeholder:"TEXT" help:"Only tasks whose id, a metadata value or the payload contains TEXT (case-sensitive)."`
	Group     string `placeholder:"GROUP" help:"Only tasks enqueued with this aggregation group (exact match)."`
	Limit     int    `default:"100" placeholder:"N" help:"Print at most N tasks (default: ${default})."`
	All       bool   `help:"Print every matching task (ignores --limit)."`
	PageToken string `name:"page-token" placeholder:"TOKEN" help:"Continue a previous listing of one --queue where it stopped."`
}

// taskFilter is what a listing keeps, as the flags give it.
type taskFilter struct {
	queue, state, typ, search, group string
}

func (c *taskLsCmd) filter() taskFilter {
	return taskFilter{queue: c.Queue, state: c.State, typ: c.Type, search: c.Search, group: c.Group}
}

// request is the ListTasksRequest of the filter for one queue.
func (f taskFilter) request(queue string) *conveyorv1.ListTasksRequest {
	return &conveyorv1.ListTasksRequest{Queue: queue, State: parseState(f.state), Type: f.typ,
		Search: f.search, Group: f.group}
}

// Run lists the tasks in the server's order (by id, whatever their
// state): a table, or with --json one array; an empty table says so.
// When tasks remain past --limit, the way to go on goes to standard error,
// so that standard output stays one table or array.
func (c *taskLsCmd) Run(k *kong.Context) error {
	switch {
	case c.Limit < 1 && !c.All:
		return usageErrorf("--limit must be at least 1, got %d", c.Limit)
	case c.PageToken != "" && c.Queue == "":
		return usageErrorf("--page-token continues the listing of one queue: give its --queue too")
	}
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()

	out := newTaskList(k, c.JSON, c.Queue == "")
	var hint string
	if c.Queue == "" {
		hint, err = c.listEveryQueue(ctx, cn, out)
	} else {
		hint, err = c.listQueue(ctx, cn, out)
	}
	if err != nil {
		return err
	}
	if err := out.close(noTasks(c.filter(), c.PageToken != "")); err != nil {
		return err
	}
	if hint != "" {
		err = writef(k.Stderr, "%s\n", hint)
	}
	return err
}

// listQueue lists one queue's tasks; the hint names the page token that
// continues after the last one printed, when more remain.
func (c *taskLsCmd) listQueue(ctx context.Context, cn *conn, out *taskList) (string, error) {
	req := c.filter().request(c.Queue)
	req.PageToken = c.PageToken
	printed := 0
	for {
		req.PageSize = maxListPage
		if !c.All {
			req.PageSize = int32(min(maxListPage, c.Limit-printed))
		}
		res, err := cn.admin.ListTasks(ctx, connect.NewRequest(req))
		if err != nil {
			return "", err
		}
		for _, t := range res.Msg.GetTasks() {
			if err := out.add(t); err != nil {
				return "", err
			}
		}
		printed += len(res.Msg.GetTasks())
		req.PageToken = res.Msg.GetNextPageToken()
		if req.PageToken == "" || (!c.All && printed >= c.Limit) {
			break
		}
	}
	if req.PageToken == "" {
		return "", nil
	}
	return "more tasks: continue with --page-token " + req.PageToken, nil
}

// maxListPage is the largest page ListTasks serves (server.MaxPageSize).
const maxListPage = 1000

// taskList prints tasks as they arrive: a JSON array, or a table, whose
// header waits for the first task (an empty listing is a line of words).
type taskList struct {
	json    *jsonArray
	table   *table
	k       *kong.Context
	byQueue bool // a QUEUE column: the listing spans queues
}

func newTaskList(k *kong.Context, asJSON, byQueue bool) *taskList {
	if asJSON {
		return &taskList{json: &jsonArray{w: k.Stdout}}
	}
	return &taskList{k: k, byQueue: byQueue}
}

func (l *taskList) add(t *conveyorv1.TaskInfo) error {
	if l.json != nil {
		return l.json.add(t)
	}
	if l.table == nil {
		headers := []string{"ID", "STATE", "TYPE", "PRIORITY", "RETRIED", "ENQUEUED", "NEXT", "LAST ERROR"}
		if l.byQueue {
			headers = append([]string{"QUEUE"}, headers...)
		}
		l.table = newTable(l.k.Stdout, headers...)
	}
	// Only a waiting task's next time says something: a pending one's is
	// when it became ready.
	next := "-"
	if st := t.GetState(); st == conveyorv1.TaskState_TASK_STATE_SCHEDULED || st == conveyorv1.TaskState_TASK_STATE_RETRY {
		next = showAgo(t.GetNextProcessAt())
	}
	cells := []string{t.GetId(), stateName(t.GetState()), t.GetType(), fmt.Sprint(t.GetPriority()),
		fmt.Sprintf("%d/%d", t.GetRetried(), t.GetMaxRetry()), showAgo(t.GetEnqueuedAt()), next,
		orDash(firstLine(t.GetLastError(), 60))}
	styles := []style{styleNone, stateStyle(cells[1])}
	if l.byQueue {
		cells = append([]string{t.GetQueue()}, cells...)
		styles = append([]style{styleNone}, styles...)
	}
	l.table.styledRow(styles, cells...)
	return nil
}

// close ends the listing; an empty table is the line none instead.
func (l *taskList) close(none string) error {
	switch {
	case l.json != nil:
		return l.json.close()
	case l.table == nil:
		return writef(l.k.Stdout, "%s\n", none)
	}
	return l.table.flush()
}
