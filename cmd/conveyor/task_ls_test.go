package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// enqueueID enqueues a task with the CLI and returns its id.
func enqueueID(t *testing.T, args ...string) string {
	t.Helper()
	var info struct{ ID string }
	if err := json.Unmarshal([]byte(mustRun(t, append([]string{"enqueue", "--json"}, args...)...)), &info); err != nil || info.ID == "" {
		t.Fatalf("enqueue %v: id %q, %v", args, info.ID, err)
	}
	return info.ID
}

// listIDs is the ids of a task ls --json output.
func listIDs(t *testing.T, out string) []string {
	t.Helper()
	var tasks []struct{ ID string }
	if err := json.Unmarshal([]byte(out), &tasks); err != nil {
		t.Fatalf("not a JSON array of tasks: %v\n%s", err, out)
	}
	ids := make([]string, len(tasks))
	for i, task := range tasks {
		ids[i] = task.ID
	}
	return ids
}

func TestTaskLs(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()
	a := enqueueID(t, addr, "--queue", "q", "--metadata", "tenant=acme", "email", `{"to":"ada"}`)
	b := enqueueID(t, addr, "--queue", "q", "email", `{"to":"bob"}`)
	c := enqueueID(t, addr, "--queue", "q", "--process-in", "1h", "report")
	d := enqueueID(t, addr, "--queue", "q", "--priority", "9", "report")
	enqueueID(t, addr, "--queue", "other", "email")

	golden(t, "task_ls", mustRun(t, "task", "ls", addr, "--queue", "q"))
	golden(t, "task_ls_json", mustRun(t, "task", "ls", addr, "--queue", "q", "--state", "scheduled", "--json"))

	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"every state", nil, []string{a, b, c, d}}, // by id, whatever the state
		{"state", []string{"--state", "pending"}, []string{a, b, d}},
		{"type", []string{"--type", "report"}, []string{c, d}},
		{"type and state", []string{"--type", "report", "--state", "pending"}, []string{d}},
		{"search payload", []string{"--search", "bob"}, []string{b}},
		{"search metadata", []string{"--search", "acme"}, []string{a}},
		{"search id", []string{"--search", c}, []string{c}},
		{"nothing", []string{"--type", "none"}, []string{}},
	} {
		out := mustRun(t, append([]string{"task", "ls", addr, "--queue", "q", "--json"}, tc.args...)...)
		if got := listIDs(t, out); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: listed %v, want %v", tc.name, got, tc.want)
		}
	}
	g1 := enqueueID(t, addr, "--queue", "g", "--group", "daily", "digest")
	enqueueID(t, addr, "--queue", "g", "--group", "weekly", "digest")
	g3 := enqueueID(t, addr, "--queue", "g", "--group", "daily", "digest")
	if got := listIDs(t, mustRun(t, "task", "ls", addr, "--queue", "g", "--json", "--group", "daily")); strings.Join(got, ",") != g1+","+g3 {
		t.Errorf("--group daily: listed %v, want %v", got, []string{g1, g3})
	}
	if out := mustRun(t, "task", "ls", addr, "--queue", "q", "--json", "--type", "none"); out != "[]\n" {
		t.Errorf("an empty listing is %q, want []", out)
	}

	// --limit stops where asked and says how to go on; the token continues
	// right after the last task printed.
	out, stderr, err := runCLIFull(t, "", "task", "ls", addr, "--queue", "q", "--json", "--limit", "3")
	if err != nil {
		t.Fatal(err)
	}
	if got := listIDs(t, out); strings.Join(got, ",") != strings.Join([]string{a, b, c}, ",") {
		t.Errorf("--limit 3 listed %v", got)
	}
	token, ok := strings.CutPrefix(strings.TrimSpace(stderr), "more tasks: continue with --page-token ")
	if !ok {
		t.Fatalf("no page token on stderr: %q", stderr)
	}
	out, stderr, err = runCLIFull(t, "", "task", "ls", addr, "--queue", "q", "--json", "--page-token", token)
	if err != nil || stderr != "" {
		t.Fatalf("next page: %v, stderr %q", err, stderr)
	}
	if got := listIDs(t, out); len(got) != 1 || got[0] != d {
		t.Errorf("the next page listed %v, want [%s]", got, d)
	}
	if _, stderr, _ := runCLIFull(t, "", "task", "ls", addr, "--queue", "q", "--limit", "4"); stderr != "" {
		t.Errorf("a listing that ends at --limit hints %q", stderr)
	}

	// --all pages through more than one server page.
	for range 3 {
		enqueueID(t, addr, "--queue", "q", "email")
	}
	// A small --limit makes the pages short; --all ignores it.
	if got := listIDs(t, mustRun(t, "task", "ls", addr, "--queue", "q", "--json", "--all", "--limit", "2")); len(got) != 7 {
		t.Errorf("--all listed %d tasks, want 7", len(got))
	}

	for _, tc := range []struct {
		name string
		args []string
		msg  string
		code int
	}{
		{"token without queue", []string{"task", "ls", addr, "--page-token", "x"}, "give its --queue too", exitUsage},
		{"bad state", []string{"task", "ls", addr, "--queue", "q", "--state", "done"}, "--state", exitUsage},
		{"bad limit", []string{"task", "ls", addr, "--queue", "q", "--limit", "0"}, "--limit", exitUsage},
		{"bad queue", []string{"task", "ls", addr, "--queue", "a/b"}, "is invalid", exitRefused},
		{"bad token", []string{"task", "ls", addr, "--queue", "q", "--page-token", "garbage"}, "", exitRefused},
	} {
		out, err := runCLI(t, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || exitCode(err) != tc.code || out != "" {
			t.Errorf("%s: error %v (exit %d), printed %q; want %q, exit %d", tc.name, err, exitCode(err), out, tc.msg, tc.code)
		}
	}
}

// TestTaskLsEveryQueue: without --queue, task ls lists every queue's
// tasks, merged in id order, with a QUEUE column.
func TestTaskLsEveryQueue(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()
	a1 := enqueueID(t, addr, "--queue", "b", "email")
	a2 := enqueueID(t, addr, "--queue", "a", "report")
	a3 := enqueueID(t, addr, "--queue", "b", "--process-in", "1h", "email")
	a4 := enqueueID(t, addr, "--queue", "c", "email")
	a5 := enqueueID(t, addr, "--queue", "a", "email")

	golden(t, "task_ls_every_queue", mustRun(t, "task", "ls", addr))
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"every task", nil, []string{a1, a2, a3, a4, a5}},
		{"state", []string{"--state", "scheduled"}, []string{a3}},
		{"type", []string{"--type", "email"}, []string{a1, a3, a4, a5}},
		{"--all ignores --limit", []string{"--all", "--limit", "1"}, []string{a1, a2, a3, a4, a5}},
		{"nothing", []string{"--type", "none"}, []string{}},
	} {
		out, stderr, err := runCLIFull(t, "", append([]string{"task", "ls", addr, "--json"}, tc.args...)...)
		if err != nil || stderr != "" {
			t.Fatalf("%s: %v, stderr %q", tc.name, err, stderr)
		}
		if got := listIDs(t, out); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: listed %v, want %v", tc.name, got, tc.want)
		}
	}

	// --limit stops in id order across the queues, and says how to see more
	// (a page token continues one queue only).
	out, stderr, err := runCLIFull(t, "", "task", "ls", addr, "--json", "--limit", "3")
	if err != nil {
		t.Fatal(err)
	}
	if got := listIDs(t, out); strings.Join(got, ",") != strings.Join([]string{a1, a2, a3}, ",") {
		t.Errorf("--limit 3 listed %v", got)
	}
	if want := "more tasks: raise --limit, use --all, or give --queue to page through one queue\n"; stderr != want {
		t.Errorf("--limit 3 hinted %q, want %q", stderr, want)
	}
	if _, stderr, _ := runCLIFull(t, "", "task", "ls", addr, "--limit", "5"); stderr != "" {
		t.Errorf("a listing that ends at --limit hints %q", stderr)
	}
}
