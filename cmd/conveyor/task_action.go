package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// taskActionFlags are the arguments task cancel, delete, run and archive
// share: task ids, or a filter for a bulk action on the server.
type taskActionFlags struct {
	clientFlags

	IDs    []string `arg:"" optional:"" name:"id" complete:"task" help:"Task ids; '-' reads more from standard input (separated by spaces or lines)."`
	Queue  string   `placeholder:"QUEUE" complete:"queue" help:"Instead of ids: act on every task of QUEUE in --state (and of --type, matching --search)."`
	State  string   `enum:",${states}" default:"" placeholder:"STATE" help:"With --queue, required: the state of the tasks to act on (${state_list})."`
	Type   string   `placeholder:"TYPE" help:"With --queue: only tasks of this type."`
	Search string   `placeholder:"TEXT" help:"With --queue: only tasks whose id, a metadata value or the payload contains TEXT."`
	Group  string   `placeholder:"GROUP" help:"With --queue: only tasks enqueued with this aggregation group."`
}

// taskAction is one of the four actions, as each RPC form calls it.
type taskAction struct {
	verb string // for messages: "cancel"
	bulk conveyorv1.TaskAction
	// one acts on one task and returns it after (nil for delete).
	one func(context.Context, *conn, string) (*conveyorv1.TaskInfo, error)
	// batch acts on 1..batchSize tasks, one result each.
	batch func(context.Context, *conn, []string) ([]*conveyorv1.BatchTaskResult, error)
}

// batchSize is how many ids one Batch*Tasks call carries (the server's
// MaxBatchItems).
const batchSize = 1000

// run applies a to the tasks the flags name.
func (f *taskActionFlags) run(k *kong.Context, in stdin, a taskAction) error {
	bulk := f.Queue != ""
	switch {
	case bulk && len(f.IDs) > 0:
		return usageErrorf("give task ids or --queue, not both")
	case bulk && f.State == "":
		return usageErrorf("--queue needs --state: a bulk action names the state it applies to")
	case !bulk && len(f.IDs) == 0:
		return usageErrorf("give task ids, or --queue and --state")
	case !bulk && (f.State != "" || f.Type != "" || f.Search != "" || f.Group != ""):
		return usageErrorf("--state, --type, --search and --group select tasks with --queue; with ids, leave them out")
	}
	cn, err := f.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	if bulk {
		return f.runBulk(ctx, k, cn, a)
	}
	ids, err := expandIDs(f.IDs, in)
	if err != nil {
		return err
	}
	if len(ids) == 1 {
		return f.runOne(ctx, k.Stdout, cn, a, ids[0])
	}
	return f.runBatch(ctx, k.Stdout, k.Stderr, cn, a, ids)
}

// expandIDs replaces '-' with the ids read from standard input and drops
// repeats (a second action on the same task would only fail).
func expandIDs(args []string, in stdin) ([]string, error) {
	var ids []string
	for _, a := range args {
		if a != "-" {
			ids = append(ids, a)
			continue
		}
		b, err := io.ReadAll(in)
		if err != nil {
			return nil, fmt.Errorf("read task ids from standard input: %w", err)
		}
		ids = append(ids, strings.Fields(string(b))...)
	}
	seen := make(map[string]bool, len(ids))
	ids = slices.DeleteFunc(ids, func(id string) bool {
		dup := seen[id]
		seen[id] = true
		return dup
	})
	if len(ids) == 0 {
		return nil, usageErrorf("no task ids on standard input")
	}
	return ids, nil
}

// runOne uses the single-task RPC: its error carries a code (not_found,
// failed_precondition) that the exit code can tell apart.
func (f *taskActionFlags) runOne(ctx context.Context, w io.Writer, cn *conn, a taskAction, id string) error {
	t, err := a.one(ctx, cn, id)
	if err != nil {
		return err
	}
	res := []*conveyorv1.BatchTaskResult{{Id: id}}
	if f.JSON {
		return writeJSONList(w, res)
	}
	note := "deleted"
	if t != nil {
		note = "now " + stateName(t.GetState())
		if a.bulk == conveyorv1.TaskAction_TASK_ACTION_CANCEL && t.GetState() == conveyorv1.TaskState_TASK_STATE_ACTIVE {
			note += ", its worker was told to stop"
		}
	}
	tb := newTable(w, "ID", "RESULT")
	tb.row(id, "ok ("+note+")")
	return tb.flush()
}

// runBatch sends the ids in chunks of batchSize, with a progress bar (on
// errw, which is not the result) when there is more than one chunk, and
// prints one result per id on w.
func (f *taskActionFlags) runBatch(ctx context.Context, w, errw io.Writer, cn *conn, a taskAction, ids []string) error {
	var bar *progressBar
	if len(ids) > batchSize && !f.JSON {
		bar = &progressBar{w: errw, tty: isTerminal(errw), label: a.verb}
	}
	results := make([]*conveyorv1.BatchTaskResult, 0, len(ids))
	var failed int64
	for chunk := range slices.Chunk(ids, batchSize) {
		res, err := a.batch(ctx, cn, chunk)
		if err != nil {
			if bar != nil {
				bar.end()
			}
			if len(results) == 0 {
				return err
			}
			// The chunks before were applied: say which, then why the
			// rest were not.
			return cmp.Or(f.printResults(w, results),
				fmt.Errorf("%s: the %d tasks listed were acted on; the call for the other %d failed: %w",
					a.verb, len(results), len(ids)-len(results), err))
		}
		for _, r := range res {
			if r.GetError() != "" {
				failed++
			}
		}
		results = append(results, res...)
		if bar != nil {
			bar.show(int64(len(results)), int64(len(ids)), failed)
		}
	}
	if bar != nil {
		bar.end()
	}
	return cmp.Or(f.printResults(w, results), partial(a, failed, int64(len(ids))))
}

// printResults writes one result per id: a JSON array with --json, else a
// table.
func (f *taskActionFlags) printResults(w io.Writer, results []*conveyorv1.BatchTaskResult) error {
	if f.JSON {
		return writeJSONList(w, results)
	}
	tb := newTable(w, "ID", "RESULT")
	for _, r := range results {
		tb.row(r.GetId(), cmp.Or(r.GetError(), "ok"))
	}
	return tb.flush()
}

// runBulk asks the server to act on every task that matches the filter,
// showing the progress it streams on standard error and the final counts,
// the result, on standard output.
func (f *taskActionFlags) runBulk(ctx context.Context, k *kong.Context, cn *conn, a taskAction) error {
	stream, err := cn.admin.BulkTasks(ctx, connect.NewRequest(&conveyorv1.BulkTasksRequest{
		Action: a.bulk, Queue: f.Queue, State: parseState(f.State), Type: f.Type, Search: f.Search, Group: f.Group,
	}))
	if err != nil {
		return err
	}
	defer func() { _ = stream.Close() }()
	var bar *progressBar
	if !f.JSON {
		bar = &progressBar{w: k.Stderr, tty: isTerminal(k.Stderr), label: a.verb}
	}
	last := &conveyorv1.BulkTasksProgress{}
	for stream.Receive() {
		last = stream.Msg()
		if bar != nil {
			bar.show(last.GetSucceeded()+last.GetFailed(), last.GetTotal(), last.GetFailed())
		}
	}
	if bar != nil {
		bar.end()
	}
	if err := stream.Err(); err != nil {
		return err
	}
	if !last.GetDone() {
		return fmt.Errorf("%s: the server ended the stream before the action was done", a.verb)
	}
	if f.JSON {
		err = writeJSON(k.Stdout, last)
	} else {
		err = bulkSummary(k.Stdout, a, last)
	}
	return cmp.Or(err, partial(a, last.GetFailed(), last.GetSucceeded()+last.GetFailed()))
}

// bulkSummary is the final counts of a bulk action, for people.
func bulkSummary(w io.Writer, a taskAction, p *conveyorv1.BulkTasksProgress) error {
	s := fmt.Sprintf("%s: %d tasks, %d succeeded, %d failed", a.verb, p.GetSucceeded()+p.GetFailed(), p.GetSucceeded(), p.GetFailed())
	if p.GetFirstError() != "" {
		s += " (first error: " + p.GetFirstError() + ")"
	}
	return writef(w, "%s\n", s)
}

// partial is the error of an action that failed for some tasks: exit code
// exitPartial, after the per-task results are printed.
func partial(a taskAction, failed, total int64) error {
	if failed == 0 {
		return nil
	}
	return withCode(exitPartial, "%s failed for %d of %d tasks", a.verb, failed, total)
}
