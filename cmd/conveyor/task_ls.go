package main

import (
	"fmt"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// taskLsCmd is `conveyor task ls --queue Q [filters]`. It pages through
// ListTasks itself: --limit bounds how many tasks it prints (the last page
// is asked to end there, so the page token it reports continues exactly
// after the last task printed), --all prints every one.
type taskLsCmd struct {
	clientFlags

	Queue     string `required:"" placeholder:"QUEUE" help:"Queue to list."`
	State     string `default:"all" enum:"all,${states}" placeholder:"STATE" help:"Only tasks in this state: all (the default), ${state_list}."`
	Type      string `placeholder:"TYPE" help:"Only tasks of this type (exact match)."`
	Search    string `placeholder:"TEXT" help:"Only tasks whose id, a metadata value or the payload contains TEXT (case-sensitive)."`
	Group     string `placeholder:"GROUP" help:"Only tasks enqueued with this aggregation group (exact match)."`
	Limit     int    `default:"100" placeholder:"N" help:"Print at most N tasks (default: ${default})."`
	All       bool   `help:"Print every matching task (ignores --limit)."`
	PageToken string `name:"page-token" placeholder:"TOKEN" help:"Continue a previous listing where it stopped."`
}

// Run lists the tasks in the server's order (by id, whatever their
// state): a table, or with --json one array.
// When tasks remain past --limit, the token to continue with goes to
// standard error, so that standard output stays one table or array.
func (c *taskLsCmd) Run(k *kong.Context) error {
	if c.Limit < 1 && !c.All {
		return usageErrorf("--limit must be at least 1, got %d", c.Limit)
	}
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()

	out := newTaskList(k, c.JSON)
	req := &conveyorv1.ListTasksRequest{Queue: c.Queue, State: parseState(c.State), Type: c.Type,
		Search: c.Search, Group: c.Group, PageToken: c.PageToken}
	printed := 0
	for {
		req.PageSize = maxListPage
		if !c.All {
			req.PageSize = int32(min(maxListPage, c.Limit-printed))
		}
		res, err := cn.admin.ListTasks(ctx, connect.NewRequest(req))
		if err != nil {
			return err
		}
		for _, t := range res.Msg.GetTasks() {
			if err := out.add(t); err != nil {
				return err
			}
		}
		printed += len(res.Msg.GetTasks())
		req.PageToken = res.Msg.GetNextPageToken()
		if req.PageToken == "" || (!c.All && printed >= c.Limit) {
			break
		}
	}
	if err := out.close(); err != nil {
		return err
	}
	if req.PageToken != "" {
		err = writef(k.Stderr, "more tasks: continue with --page-token %s\n", req.PageToken)
	}
	return err
}

// maxListPage is the largest page ListTasks serves (server.MaxPageSize).
const maxListPage = 1000

// taskList prints tasks as they arrive: a JSON array, or a table.
type taskList struct {
	json  *jsonArray
	table *table
}

func newTaskList(k *kong.Context, asJSON bool) *taskList {
	if asJSON {
		return &taskList{json: &jsonArray{w: k.Stdout}}
	}
	return &taskList{table: newTable(k.Stdout, "ID", "STATE", "TYPE", "PRIORITY", "RETRIED", "ENQUEUED", "NEXT", "LAST ERROR")}
}

func (l *taskList) add(t *conveyorv1.TaskInfo) error {
	if l.json != nil {
		return l.json.add(t)
	}
	// Only a waiting task's next time says something: a pending one's is
	// when it became ready.
	next := "-"
	if st := t.GetState(); st == conveyorv1.TaskState_TASK_STATE_SCHEDULED || st == conveyorv1.TaskState_TASK_STATE_RETRY {
		next = showTime(t.GetNextProcessAt())
	}
	l.table.row(t.GetId(), stateName(t.GetState()), t.GetType(), fmt.Sprint(t.GetPriority()),
		fmt.Sprintf("%d/%d", t.GetRetried(), t.GetMaxRetry()), showTime(t.GetEnqueuedAt()), next,
		orDash(firstLine(t.GetLastError(), 60)))
	return nil
}

func (l *taskList) close() error {
	if l.json != nil {
		return l.json.close()
	}
	return l.table.flush()
}
