package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func TestCron(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()

	kv := parseListing(t, mustRun(t, "cron", "create", addr, "--queue", "reports", "--priority", "7",
		"--timeout", "30s", "--metadata", "team=ops", "0 3 * * *", "report:daily", `{"n":1}`))
	id := kv["id"]
	for k, want := range map[string]string{
		"spec": "0 3 * * *", "queue": "reports", "type": "report:daily", "paused": "no",
		"payload": `{"n":1}`, "metadata": "team=ops", "options": "priority=7, timeout=30s",
	} {
		if kv[k] != want {
			t.Errorf("cron create: %s = %q, want %q", k, kv[k], want)
		}
	}
	if len(id) != 26 || kv["next_run_at"] == "" {
		t.Errorf("cron create: id %q, next_run_at %q", id, kv["next_run_at"])
	}

	golden(t, "cron_create_named", mustRun(t, "cron", "create", addr, "--id", "nightly", "--queue", "maint", "@daily", "cleanup"))
	golden(t, "cron_ls", mustRun(t, "cron", "ls", addr))
	golden(t, "cron_get_json", mustRun(t, "cron", "get", addr, "--json", "nightly"))

	// update keeps what no flag names.
	kv = parseListing(t, mustRun(t, "cron", "update", addr, id, "--spec", "@hourly", "--priority", "2",
		"--timeout", "0s", "--payload", "new"))
	for k, want := range map[string]string{
		"spec": "@hourly", "queue": "reports", "type": "report:daily", "payload": "new",
		"metadata": "team=ops", "options": "priority=2",
	} {
		if kv[k] != want {
			t.Errorf("cron update: %s = %q, want %q", k, kv[k], want)
		}
	}

	if kv := parseListing(t, mustRun(t, "cron", "pause", addr, "nightly")); kv["paused"] != "yes" {
		t.Errorf("cron pause: %v", kv)
	}
	if kv := parseListing(t, mustRun(t, "cron", "get", addr, "nightly")); kv["paused"] != "yes" {
		t.Errorf("cron get after pause: %v", kv)
	}
	if kv := parseListing(t, mustRun(t, "cron", "resume", addr, "nightly")); kv["paused"] != "no" {
		t.Errorf("cron resume: %v", kv)
	}
	var entries []struct{ ID string }
	if err := json.Unmarshal([]byte(mustRun(t, "cron", "ls", addr, "--json")), &entries); err != nil || len(entries) != 2 {
		t.Errorf("cron ls --json: %v, %v", entries, err)
	}

	if out := mustRun(t, "cron", "delete", addr, "nightly"); out != "deleted cron entry nightly\n" {
		t.Errorf("cron delete printed %q", out)
	}

	for _, tc := range []struct {
		name string
		args []string
		msg  string
		code int
	}{
		{"id in use", []string{"cron", "create", addr, "--id", id, "@daily", "t"}, "already exists", exitRefused},
		{"bad spec", []string{"cron", "create", addr, "every day", "t"}, "spec", exitRefused},
		{"deleted", []string{"cron", "get", addr, "nightly"}, "not found", exitNotFound},
		{"update unknown", []string{"cron", "update", addr, "nightly", "--spec", "@daily"}, "not found", exitNotFound},
		{"update nothing", []string{"cron", "update", addr, id}, "nothing to change", exitUsage},
		{"metadata set and cleared", []string{"cron", "update", addr, id, "--metadata", "a=b", "--clear-metadata"}, "--clear-metadata", exitUsage},
		{"delete unknown", []string{"cron", "delete", addr, "nightly"}, "not found", exitNotFound},
		{"pause unknown", []string{"cron", "pause", addr, "nightly"}, "not found", exitNotFound},
		{"payload twice", []string{"cron", "create", addr, "--payload-file", "x", "@daily", "t", "inline"}, "not both", exitUsage},
	} {
		out, err := runCLI(t, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || exitCode(err) != tc.code || out != "" {
			t.Errorf("%s: error %v (exit %d), printed %q; want %q, exit %d", tc.name, err, exitCode(err), out, tc.msg, tc.code)
		}
	}
}

// TestCronFires: an entry's fire enqueues a task that carries the entry's
// id, and the entry then names it.
func TestCronFires(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()
	mustRun(t, "cron", "create", addr, "--id", "tick", "--queue", "fired", "@every 1s", "tick")
	var fired []struct {
		ID       string
		Metadata map[string]string
	}
	servertest.Eventually(t, 10*time.Second, "the entry fires", func() bool {
		if err := json.Unmarshal([]byte(mustRun(t, "task", "ls", addr, "--queue", "fired", "--json")), &fired); err != nil {
			t.Fatal(err)
		}
		return len(fired) > 0
	})
	if fired[0].Metadata["conveyor-cron-id"] != "tick" || fired[0].Metadata["conveyor-cron-fire"] == "" {
		t.Errorf("fired task metadata: %v", fired[0].Metadata)
	}
	servertest.Eventually(t, 10*time.Second, "the entry names its last task", func() bool {
		kv := parseListing(t, mustRun(t, "cron", "get", addr, "tick"))
		return kv["last_task_id"] != "" && kv["last_run_at"] != ""
	})
	mustRun(t, "cron", "pause", addr, "tick")
}

// TestCronUpdateChangesOnlyItsFlags runs `cron update` with one flag at a
// time and checks that the entry changed in that flag's field and in no
// other, its next run included (only --spec moves it).
func TestCronUpdateChangesOnlyItsFlags(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()
	entry := func(out string) *conveyorv1.CronEntry {
		t.Helper()
		e := &conveyorv1.CronEntry{}
		if err := protojson.Unmarshal([]byte(out), e); err != nil {
			t.Fatalf("--json output is not a CronEntry: %v\n%s", err, out)
		}
		return e
	}
	want := entry(mustRun(t, "cron", "create", addr, "--json", "--id", "e", "--queue", "reports", "--priority", "7",
		"--max-retry", "3", "--timeout", "30s", "--retention", "1h", "--unique", "u", "--unique-ttl", "1m",
		"--metadata", "team=ops", "--content-type", "text/plain", "@every 1h", "report", "body"))
	for _, tc := range []struct {
		flags  []string
		change func(e *conveyorv1.CronEntry)
	}{
		{[]string{"--type", "other"}, func(e *conveyorv1.CronEntry) { e.Type = "other" }},
		{[]string{"--payload", "new"}, func(e *conveyorv1.CronEntry) { e.Payload = []byte("new") }},
		{[]string{"--queue", "elsewhere"}, func(e *conveyorv1.CronEntry) { e.Queue = "elsewhere" }},
		{[]string{"--priority", "2"}, func(e *conveyorv1.CronEntry) { e.Options.Priority = 2 }},
		{[]string{"--max-retry", "9"}, func(e *conveyorv1.CronEntry) { e.Options.MaxRetry = 9 }},
		{[]string{"--timeout", "0s"}, func(e *conveyorv1.CronEntry) { e.Options.Timeout = nil }},
		{[]string{"--retention", "0s"}, func(e *conveyorv1.CronEntry) { e.Options.Retention = durationpb.New(0) }},
		{[]string{"--unique", "v"}, func(e *conveyorv1.CronEntry) { e.Options.UniqueKey = "v" }},
		{[]string{"--unique-ttl", "2m"}, func(e *conveyorv1.CronEntry) { e.Options.UniqueTtl = durationpb.New(2 * time.Minute) }},
		{[]string{"--metadata", "team=dev"}, func(e *conveyorv1.CronEntry) { e.Metadata = map[string]string{"team": "dev"} }},
		{[]string{"--content-type", "application/json"}, func(e *conveyorv1.CronEntry) { e.ContentType = "application/json" }},
		{[]string{"--clear-metadata"}, func(e *conveyorv1.CronEntry) { e.Metadata = nil }},
		// A key cleared takes its TTL with it: the server refuses a TTL alone.
		{[]string{"--unique", ""}, func(e *conveyorv1.CronEntry) { e.Options.UniqueKey, e.Options.UniqueTtl = "", nil }},
	} {
		tc.change(want)
		got := entry(mustRun(t, append([]string{"cron", "update", addr, "--json", "e"}, tc.flags...)...))
		if !proto.Equal(got, want) {
			t.Fatalf("cron update %s:\n got %v\nwant %v", strings.Join(tc.flags, " "), got, want)
		}
	}
	got := entry(mustRun(t, "cron", "update", addr, "--json", "e", "--spec", "@every 2h"))
	if got.GetSpec() != "@every 2h" || time.Until(got.GetNextRunAt().AsTime()) < time.Hour || got.GetType() != want.GetType() {
		t.Fatalf("cron update --spec: %v; want the new spec, its next run about 2h from now, the rest kept", got)
	}
}
