package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// taskState is the state the server has for id, by its short name.
func taskState(t *testing.T, s *servertest.Server, id string) string {
	t.Helper()
	info, err := sdkClient(t, s).GetTask(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.String()
}

func TestTaskActionsOneID(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()
	id := enqueueID(t, addr, "--queue", "q", "t")

	golden(t, "task_archive_one", mustRun(t, "task", "archive", addr, id))
	if st := taskState(t, s, id); st != "archived" {
		t.Fatalf("after task archive: %s", st)
	}
	mustRun(t, "task", "run", addr, id)
	if st := taskState(t, s, id); st != "pending" {
		t.Fatalf("after task run: %s", st)
	}
	golden(t, "task_cancel_one_json", mustRun(t, "task", "cancel", addr, "--json", id))
	if st := taskState(t, s, id); st != "canceled" {
		t.Fatalf("after task cancel: %s", st)
	}

	for _, tc := range []struct {
		name string
		args []string
		msg  string
		code int
	}{
		{"terminal", []string{"task", "archive", addr, id}, "", exitRefused},
		{"unknown", []string{"task", "run", addr, ulid.Make().String()}, "not found", exitNotFound},
	} {
		out, err := runCLI(t, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || exitCode(err) != tc.code || out != "" {
			t.Errorf("%s: error %v (exit %d), printed %q; want %q, exit %d", tc.name, err, exitCode(err), out, tc.msg, tc.code)
		}
	}

	golden(t, "task_delete_one", mustRun(t, "task", "delete", addr, id))
	if _, err := runCLI(t, "", "task", "get", addr, id); exitCode(err) != exitNotFound {
		t.Errorf("task get after delete: %v (exit %d)", err, exitCode(err))
	}
}

func TestTaskActionsBatch(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()
	a := enqueueID(t, addr, "--queue", "q", "t")
	b := enqueueID(t, addr, "--queue", "q", "t")
	missing := ulid.Make().String()

	// Ids from the arguments and from standard input; a repeat is dropped.
	out, err := runCLI(t, b+"\n"+missing+"\n", "task", "archive", addr, a, "-", a)
	if exitCode(err) != exitPartial || !strings.Contains(err.Error(), "archive failed for 1 of 3 tasks") {
		t.Errorf("a batch with an unknown id: %v (exit %d)", err, exitCode(err))
	}
	golden(t, "task_archive_batch", out)
	if taskState(t, s, a) != "archived" || taskState(t, s, b) != "archived" {
		t.Errorf("the batch did not archive both tasks")
	}

	out, err = runCLI(t, "", "task", "run", addr, "--json", a, b)
	if err != nil {
		t.Fatal(err)
	}
	var results []map[string]string
	if err := json.Unmarshal([]byte(out), &results); err != nil || len(results) != 2 ||
		results[0]["id"] != a || results[0]["error"] != "" || results[1]["id"] != b {
		t.Errorf("task run --json: %v\n%s", err, out)
	}

	// More than one call's worth of ids: progress lines (not a terminal),
	// then every result.
	ids := make([]string, batchSize+1)
	for i := range ids {
		ids[i] = ulid.Make().String()
	}
	out, stderr, err := runCLIFull(t, strings.Join(ids, "\n"), "task", "delete", addr, "-")
	if exitCode(err) != exitPartial {
		t.Errorf("deleting unknown ids: %v (exit %d)", err, exitCode(err))
	}
	if stderr != "delete: 1000/1001 tasks, 1000 failed\ndelete: 1001/1001 tasks, 1001 failed\n" {
		t.Errorf("progress on standard error:\n%s", stderr)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 1+len(ids) || !strings.HasPrefix(lines[0], "ID ") || !strings.HasPrefix(lines[len(lines)-1], ids[len(ids)-1]+"  ") {
		t.Errorf("results on standard output:\n%s", strings.Join(lines[:3], "\n"))
	}

	// A later call that fails (its ids are past the server's request
	// bound): the results of the calls before are printed all the same,
	// and the error says how many were acted on.
	tasks := make([]*conveyor.Task, batchSize)
	for i := range tasks {
		tasks[i] = conveyor.NewTask("t", nil, conveyor.Queue("q"))
	}
	res, err := sdkClient(t, s).EnqueueBatch(context.Background(), tasks)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]string, len(res))
	for i, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		first[i] = r.Task.ID
	}
	huge := make([]string, batchSize)
	for i := range huge {
		huge[i] = fmt.Sprint(i, strings.Repeat("x", 40<<10))
	}
	out, err = runCLI(t, strings.Join(append(first, huge...), "\n"), "task", "archive", addr, "-")
	if err == nil || exitCode(err) == 0 || !strings.Contains(err.Error(), "the 1000 tasks listed were acted on; the call for the other 1000 failed") {
		t.Fatalf("a failing second call: %v (exit %d)", err, exitCode(err))
	}
	if lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n"); len(lines) != 1+batchSize || !strings.HasPrefix(lines[1], first[0]+"  ok") {
		t.Errorf("the first call's results were not printed: %d lines, %q", len(lines), lines[:min(2, len(lines))])
	}
	if taskState(t, s, first[0]) != "archived" {
		t.Errorf("the first call's tasks were not archived")
	}
}

func TestTaskActionsUsage(t *testing.T) {
	t.Parallel()
	addr := "--addr=http://127.0.0.1:1" // never called
	id := ulid.Make().String()
	for _, tc := range []struct {
		name  string
		stdin string
		args  []string
		msg   string
	}{
		{"ids and queue", "", []string{"task", "run", addr, id, "--queue", "q", "--state", "archived"}, "not both"},
		{"queue without state", "", []string{"task", "run", addr, "--queue", "q"}, "--queue needs --state"},
		{"nothing", "", []string{"task", "cancel", addr}, "give task ids"},
		{"filter with ids", "", []string{"task", "delete", addr, id, "--type", "t"}, "leave them out"},
		{"empty stdin", " \n", []string{"task", "archive", addr, "-"}, "no task ids"},
		{"bad state", "", []string{"task", "run", addr, "--queue", "q", "--state", "dead"}, "--state"},
	} {
		out, err := runCLI(t, tc.stdin, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || exitCode(err) != exitUsage || out != "" {
			t.Errorf("%s: error %v (exit %d), printed %q; want %q, exit %d", tc.name, err, exitCode(err), out, tc.msg, exitUsage)
		}
	}
}

// startWorker runs an SDK worker on queue whose handler holds each task
// until the server cancels it; it stops at cleanup.
func startWorker(t *testing.T, s *servertest.Server, queue string, labels map[string]string) {
	t.Helper()
	w, err := conveyor.NewWorker(s.URL(), conveyor.WithQueue(queue, 3), conveyor.WithConcurrency(2), conveyor.WithLabels(labels),
		conveyor.WithDrainGrace(0)) // at cleanup, stop held handlers at once
	if err != nil {
		t.Fatal(err)
	}
	w.HandleFunc("hold", func(ctx context.Context, d *conveyor.Delivery) error {
		<-ctx.Done()
		return errors.New("canceled while held")
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker: %v", err)
		}
	})
}

// waitState waits until the task is in state.
func waitState(t *testing.T, s *servertest.Server, id, state string) {
	t.Helper()
	servertest.Eventually(t, 10*time.Second, "task "+id+" "+state, func() bool { return taskState(t, s, id) == state })
}

func TestTaskBulk(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()
	var ids []string
	for range 3 {
		ids = append(ids, enqueueID(t, addr, "--queue", "q", "t"))
	}
	other := enqueueID(t, addr, "--queue", "q", "other")
	mustRun(t, append([]string{"task", "archive", addr, other}, ids...)...)

	out, stderr, err := runCLIFull(t, "", "task", "run", addr, "--queue", "q", "--state", "archived", "--type", "t")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "task_run_bulk", out)
	// The progress, not the result, on standard error: the last message's
	// total is the 3 tasks the action met (the first's, 4, counted the
	// state without the type filter).
	if stderr != "run: 3/3 tasks\n" {
		t.Errorf("bulk run's standard error: %q", stderr)
	}
	for _, id := range ids {
		if st := taskState(t, s, id); st != "pending" {
			t.Errorf("%s is %s after the bulk run", id, st)
		}
	}
	if st := taskState(t, s, other); st != "archived" {
		t.Errorf("the bulk run ran a task of another type: %s", st)
	}
	golden(t, "task_run_bulk_json", mustRun(t, "task", "run", addr, "--json", "--queue", "q", "--state", "archived"))

	// A running task cannot be deleted: the bulk action is refused.
	startWorker(t, s, "w", nil)
	held := enqueueID(t, addr, "--queue", "w", "hold")
	waitState(t, s, held, "active")
	_, stderr, err = runCLIFull(t, "", "task", "delete", addr, "--queue", "w", "--state", "active")
	if exitCode(err) != exitRefused || !strings.Contains(err.Error()+stderr, "delete does not apply to active tasks") {
		t.Errorf("bulk delete of running tasks: %v, %q (exit %d)", err, stderr, exitCode(err))
	}
	// Canceling it tells its worker, whose answer archives it.
	kv := mustRun(t, "task", "cancel", addr, held)
	if !strings.Contains(kv, "ok (now active, its worker was told to stop)") {
		t.Errorf("cancel of a running task printed:\n%s", kv)
	}
	waitState(t, s, held, "archived")

	if _, err := runCLI(t, "", "task", "run", addr, "--queue", "a/b", "--state", "archived"); exitCode(err) != exitRefused {
		t.Errorf("bulk run on a bad queue name: %v (exit %d)", err, exitCode(err))
	}
}

func TestProgressBar(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	p := progressBar{w: &b, tty: true, label: "run"}
	p.show(50, 200, 0)
	p.show(250, 200, 3) // the total was an estimate
	p.end()
	want := "\rrun [#######.......................]  25% 50/200\x1b[K" +
		"\rrun [##############################] 100% 250/200, 3 failed\x1b[K\n"
	if b.String() != want {
		t.Errorf("terminal progress:\n%q\nwant\n%q", b.String(), want)
	}
}
