package conveyor_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/oklog/ulid/v2"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// TestInspectorTaskActions walks one task through every single-task
// action, checking the state each leaves it in.
func TestInspectorTaskActions(t *testing.T) {
	t.Parallel()
	b := inspSetup(t)
	id := b.enqueue("report", conveyor.Queue("actions"), conveyor.ProcessIn(time.Hour))
	eq(t, "enqueued", b.state(id), conveyor.TaskStateScheduled)

	steps := []struct {
		name string
		act  func(string) (*conveyor.TaskInfo, error)
		want conveyor.TaskState
	}{
		{"RunTask of a scheduled task", func(id string) (*conveyor.TaskInfo, error) { return b.insp.RunTask(b.ctx, id) }, conveyor.TaskStatePending},
		{"CancelTask of a pending task", func(id string) (*conveyor.TaskInfo, error) { return b.insp.CancelTask(b.ctx, id) }, conveyor.TaskStateCanceled},
		{"RunTask of a canceled task", func(id string) (*conveyor.TaskInfo, error) { return b.insp.RunTask(b.ctx, id) }, conveyor.TaskStatePending},
		{"ArchiveTask of a pending task", func(id string) (*conveyor.TaskInfo, error) { return b.insp.ArchiveTask(b.ctx, id) }, conveyor.TaskStateArchived},
	}
	for _, s := range steps {
		info, err := s.act(id)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		eq(t, s.name+": the answer's state", info.State, s.want)
		eq(t, s.name+": the answer's id", info.ID, id)
		eq(t, s.name+": the stored state", b.state(id), s.want)
	}

	_, err := b.insp.ArchiveTask(b.ctx, id)
	wantCode(t, "ArchiveTask of an archived task", err, connect.CodeFailedPrecondition)
	_, err = b.insp.CancelTask(b.ctx, id)
	wantCode(t, "CancelTask of an archived task", err, connect.CodeFailedPrecondition)
	wantIs(t, "CancelTask of an archived task", err, conveyor.ErrFailedPrecondition)

	if err := b.insp.DeleteTask(b.ctx, id); err != nil {
		t.Fatalf("DeleteTask: %v", err)
	}
	_, err = b.insp.GetTask(b.ctx, id)
	wantIs(t, "GetTask after DeleteTask", err, conveyor.ErrNotFound)
	wantIs(t, "DeleteTask again", b.insp.DeleteTask(b.ctx, id), conveyor.ErrNotFound)
	_, err = b.insp.RunTask(b.ctx, "")
	wantIs(t, "RunTask of no id", err, conveyor.ErrInvalidArgument)
}

// TestInspectorListTasks: the filters keep what they say, pages follow
// one another in id order, and AllTasks pages through them all.
func TestInspectorListTasks(t *testing.T) {
	t.Parallel()
	b := inspSetup(t)
	q := conveyor.Queue("listing")
	var all []string
	for range 3 {
		all = append(all, b.enqueue("email", q))
	}
	ada := b.enqueue("email", q, conveyor.MetadataKV("to", "ada@example.com"))
	later := b.enqueue("report", q, conveyor.ProcessIn(time.Hour))
	grouped := b.enqueue("digest", q, conveyor.Group("daily"))
	all = append(all, ada, later, grouped)
	b.enqueue("email", conveyor.Queue("other"))

	cases := []struct {
		name string
		opts conveyor.ListTasksOptions
		want []string
	}{
		{"every task", conveyor.ListTasksOptions{Queue: "listing"}, all},
		{"by state", conveyor.ListTasksOptions{Queue: "listing", State: conveyor.TaskStateScheduled}, []string{later}},
		{"by type", conveyor.ListTasksOptions{Queue: "listing", Type: "email"}, all[:4]},
		{"by state and type", conveyor.ListTasksOptions{Queue: "listing", State: conveyor.TaskStatePending, Type: "report"}, nil},
		{"by search", conveyor.ListTasksOptions{Queue: "listing", Search: "ada@example"}, []string{ada}},
		{"by group", conveyor.ListTasksOptions{Queue: "listing", Group: "daily"}, []string{grouped}},
		{"a queue never used", conveyor.ListTasksOptions{Queue: "unknown"}, nil},
	}
	for _, c := range cases {
		page, err := b.insp.ListTasks(b.ctx, c.opts)
		if err != nil {
			t.Fatalf("%s: ListTasks: %v", c.name, err)
		}
		if got := taskIDs(page.Tasks); !slices.Equal(got, c.want) {
			t.Errorf("%s: ListTasks = %v, want %v", c.name, got, c.want)
		}
		eq(t, c.name+": next page token", page.NextPageToken, "")
	}

	first, err := b.insp.ListTasks(b.ctx, conveyor.ListTasksOptions{Queue: "listing", PageSize: 2})
	if err != nil || len(first.Tasks) != 2 || first.NextPageToken == "" {
		t.Fatalf("a first page of 2: %v %+v", err, first)
	}
	second, err := b.insp.ListTasks(b.ctx, conveyor.ListTasksOptions{Queue: "listing", PageSize: 2, PageToken: first.NextPageToken})
	if err != nil {
		t.Fatalf("the second page: %v", err)
	}
	if got := taskIDs(second.Tasks); !slices.Equal(got, all[2:4]) {
		t.Errorf("the second page = %v, want %v", got, all[2:4])
	}

	var paged []string
	for info, err := range b.insp.AllTasks(b.ctx, conveyor.ListTasksOptions{Queue: "listing", PageSize: 1}) {
		if err != nil {
			t.Fatalf("AllTasks: %v", err)
		}
		paged = append(paged, info.ID)
	}
	if !slices.Equal(paged, all) {
		t.Errorf("AllTasks a task a page = %v, want %v", paged, all)
	}
	var firstTwo []string
	for info, err := range b.insp.AllTasks(b.ctx, conveyor.ListTasksOptions{Queue: "listing", PageSize: 1}) {
		if err != nil {
			t.Fatalf("AllTasks: %v", err)
		}
		if firstTwo = append(firstTwo, info.ID); len(firstTwo) == 2 {
			break
		}
	}
	if !slices.Equal(firstTwo, all[:2]) {
		t.Errorf("AllTasks, stopped after two = %v, want %v", firstTwo, all[:2])
	}
	var errs int
	for info, err := range b.insp.AllTasks(b.ctx, conveyor.ListTasksOptions{}) {
		errs++
		if info != nil || !errors.Is(err, conveyor.ErrInvalidArgument) {
			t.Errorf("AllTasks of no queue yielded %v, %v; want nil, ErrInvalidArgument", info, err)
		}
	}
	eq(t, "AllTasks of no queue: yields", errs, 1)
}

func taskIDs(tasks []*conveyor.TaskInfo) []string {
	var ids []string
	for _, t := range tasks {
		ids = append(ids, t.ID)
	}
	return ids
}

// TestInspectorBatchActions: each batch form acts on every id it can and
// says why not for the others, in the order given.
func TestInspectorBatchActions(t *testing.T) {
	t.Parallel()
	b := inspSetup(t)
	q := conveyor.Queue("batch")
	ids := []string{b.enqueue("t", q), b.enqueue("t", q)}
	missing := ulid.Make().String()

	res, err := b.insp.BatchCancelTasks(b.ctx, append(slices.Clone(ids), missing))
	if err != nil || len(res) != 3 {
		t.Fatalf("BatchCancelTasks: %v %+v", err, res)
	}
	for k, id := range ids {
		if res[k].ID != id || res[k].Err != nil {
			t.Errorf("BatchCancelTasks result %d = %+v, want %s without error", k, res[k], id)
		}
		eq(t, "canceled", b.state(id), conveyor.TaskStateCanceled)
	}
	eq(t, "the missing id's result id", res[2].ID, missing)
	wantCode(t, "the missing id's result", res[2].Err, connect.CodeNotFound)
	wantIs(t, "the missing id's result", res[2].Err, conveyor.ErrNotFound)
	again, err := b.insp.BatchCancelTasks(b.ctx, ids[:1])
	if err != nil || len(again) != 1 {
		t.Fatalf("BatchCancelTasks of a canceled task: %v %+v", err, again)
	}
	wantIs(t, "canceling a canceled task in a batch", again[0].Err, conveyor.ErrFailedPrecondition)

	check := func(name string, act func([]string) ([]conveyor.TaskActionResult, error), want conveyor.TaskState) {
		t.Helper()
		res, err := act(ids)
		if err != nil || len(res) != len(ids) {
			t.Fatalf("%s: %v %+v", name, err, res)
		}
		for k, id := range ids {
			if res[k].Err != nil {
				t.Errorf("%s of %s: %v", name, id, res[k].Err)
			}
			if want != conveyor.TaskStateUnspecified {
				eq(t, name, b.state(id), want)
			}
		}
	}
	check("BatchRunTasks", func(ids []string) ([]conveyor.TaskActionResult, error) { return b.insp.BatchRunTasks(b.ctx, ids) }, conveyor.TaskStatePending)
	check("BatchArchiveTasks", func(ids []string) ([]conveyor.TaskActionResult, error) { return b.insp.BatchArchiveTasks(b.ctx, ids) }, conveyor.TaskStateArchived)
	check("BatchDeleteTasks", func(ids []string) ([]conveyor.TaskActionResult, error) { return b.insp.BatchDeleteTasks(b.ctx, ids) }, conveyor.TaskStateUnspecified)
	for _, id := range ids {
		_, err := b.insp.GetTask(b.ctx, id)
		wantIs(t, "GetTask after BatchDeleteTasks", err, conveyor.ErrNotFound)
	}
	_, err = b.insp.BatchRunTasks(b.ctx, nil)
	wantIs(t, "BatchRunTasks of no id", err, conveyor.ErrInvalidArgument)
}

// TestInspectorBulkTasks: a bulk action acts on every task its filter
// matches, reports its progress, and is refused whole when the state
// never takes it.
func TestInspectorBulkTasks(t *testing.T) {
	t.Parallel()
	b := inspSetup(t)
	q := conveyor.Queue("bulk")
	var emails []string
	for range 5 {
		emails = append(emails, b.enqueue("email", q))
	}
	report := b.enqueue("report", q)

	var reports []conveyor.BulkProgress
	got, err := b.insp.BulkTasks(b.ctx, conveyor.TaskActionArchive, conveyor.BulkTasksOptions{Queue: "bulk",
		State: conveyor.TaskStatePending, Type: "email", Progress: func(p conveyor.BulkProgress) { reports = append(reports, p) }})
	if err != nil {
		t.Fatalf("BulkTasks: %v", err)
	}
	want := conveyor.BulkProgress{Total: 5, Succeeded: 5, Done: true}
	eq(t, "BulkTasks' final counts", got, want)
	if len(reports) == 0 || reports[len(reports)-1] != want {
		t.Errorf("progress reports = %+v, want them to end with %+v", reports, want)
	}
	for _, id := range emails {
		eq(t, "a bulk-archived task", b.state(id), conveyor.TaskStateArchived)
	}
	eq(t, "the task of another type", b.state(report), conveyor.TaskStatePending)

	_, err = b.insp.BulkTasks(b.ctx, conveyor.TaskActionRun, conveyor.BulkTasksOptions{Queue: "bulk", State: conveyor.TaskStatePending})
	wantCode(t, "BulkTasks run of pending tasks", err, connect.CodeFailedPrecondition)
	_, err = b.insp.BulkTasks(b.ctx, conveyor.TaskActionRun, conveyor.BulkTasksOptions{Queue: "bulk"})
	wantIs(t, "BulkTasks of no state", err, conveyor.ErrInvalidArgument)
	_, err = b.insp.BulkTasks(b.ctx, conveyor.TaskAction(0), conveyor.BulkTasksOptions{Queue: "bulk", State: conveyor.TaskStatePending})
	wantIs(t, "BulkTasks of no action", err, conveyor.ErrInvalidArgument)

	got, err = b.insp.BulkTasks(b.ctx, conveyor.TaskActionDelete, conveyor.BulkTasksOptions{Queue: "bulk", State: conveyor.TaskStateArchived})
	if err != nil || got != (conveyor.BulkProgress{Total: 5, Succeeded: 5, Done: true}) {
		t.Fatalf("BulkTasks delete of the archived: %v %+v", err, got)
	}
	page, err := b.insp.ListTasks(b.ctx, conveyor.ListTasksOptions{Queue: "bulk"})
	if err != nil || !slices.Equal(taskIDs(page.Tasks), []string{report}) {
		t.Fatalf("after the bulk delete, the queue lists %v (%v), want only %s", taskIDs(page.Tasks), err, report)
	}
}
