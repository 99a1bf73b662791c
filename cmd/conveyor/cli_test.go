package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// runCLI parses args with the real command tree and runs the command in
// process, with stdin as its standard input. It returns what the command
// wrote to standard output.
func runCLI(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	stdout, _, err := runCLIFull(t, stdin, args...)
	return stdout, err
}

// runCLIFull is runCLI that also returns what the command wrote to standard
// error.
func runCLIFull(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var c cli
	var stdout, stderr bytes.Buffer
	parser, err := newParser(&c, strings.NewReader(stdin), kong.Writers(&stdout, &stderr),
		kong.Exit(func(code int) { t.Fatalf("the CLI exited with %d: %s", code, stderr.String()) }))
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := parseArgs(parser, args)
	if err != nil {
		return "", "", err
	}
	err = ctx.Run()
	return stdout.String(), stderr.String(), err
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := runCLI(t, "", args...)
	if err != nil {
		t.Fatalf("conveyor %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// parseListing reads the human listing into key → value, checking that
// every value starts in the same column.
func parseListing(t *testing.T, out string) map[string]string {
	t.Helper()
	kv := map[string]string{}
	column, last := -1, ""
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if strings.HasPrefix(line, " ") { // a continuation line
			kv[last] += "\n" + strings.TrimLeft(line, " ")
			continue
		}
		k, rest, ok := strings.Cut(line, " ")
		if !ok {
			t.Fatalf("listing line %q has no value", line)
		}
		v := strings.TrimLeft(rest, " ")
		if col := len(line) - len(v); column == -1 {
			column = col
		} else if col != column {
			t.Errorf("value of %q starts at column %d, want %d:\n%s", k, col, column, out)
		}
		kv[k], last = v, k
	}
	return kv
}

func sdkClient(t *testing.T, s *servertest.Server) *conveyor.Client {
	t.Helper()
	c, err := conveyor.NewClient(s.URL(), conveyor.WithToken(s.Config.Token))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEnqueueAndGetHuman(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	id := ulid.Make().String()
	deadline := time.Now().Add(3 * time.Hour).Truncate(time.Second)
	out := mustRun(t, "enqueue", "--addr", s.URL(),
		"--queue", "emails", "--priority", "7", "--max-retry", "3",
		"--process-in", "1h", "--unique", "welcome:ada", "--unique-ttl", "10m",
		"--timeout", "30s", "--deadline", deadline.Format(time.RFC3339), "--retention", "0s",
		"--task-id", id, "--metadata", "tenant=acme", "--metadata", "traceparent=00-a=b;c",
		"--content-type", "text/plain", "email:welcome", "hello, Ada")
	kv := parseListing(t, out)
	for k, want := range map[string]string{
		"id": id, "queue": "emails", "type": "email:welcome", "state": "scheduled", "priority": "7",
		"retried": "0/3", "content_type": "text/plain", "payload": "hello, Ada",
		"metadata": "tenant=acme, traceparent=00-a=b;c", "unique_key": "welcome:ada",
		"deadline": deadline.Local().Format(time.RFC3339),
	} {
		if kv[k] != want {
			t.Errorf("%s = %q, want %q; output:\n%s", k, kv[k], want, out)
		}
	}
	for _, k := range []string{"enqueued_at", "next_process_at"} {
		if _, err := time.Parse(time.RFC3339, kv[k]); err != nil {
			t.Errorf("%s = %q is not RFC 3339: %v", k, kv[k], err)
		}
	}
	if _, ok := kv["completed_at"]; ok {
		t.Errorf("an unset time is listed:\n%s", out)
	}

	// Every flag reached the server.
	info, err := sdkClient(t, s).GetTask(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	o := info.Options
	if o.Priority != 7 || o.MaxRetry != 3 || o.ProcessIn != time.Hour || o.UniqueKey != "welcome:ada" ||
		o.UniqueTTL != 10*time.Minute || o.Timeout != 30*time.Second || !o.Deadline.Equal(deadline) ||
		o.Retention == nil || *o.Retention != 0 || info.Metadata["traceparent"] != "00-a=b;c" {
		t.Errorf("stored options %+v, metadata %v", o, info.Metadata)
	}
	if enq, err := time.Parse(time.RFC3339, kv["enqueued_at"]); err != nil || !enq.Equal(info.EnqueuedAt.Truncate(time.Second)) {
		t.Errorf("enqueued_at %q, stored %v", kv["enqueued_at"], info.EnqueuedAt)
	}

	// task get lists the same task.
	got := mustRun(t, "task", "get", "--addr", s.URL(), id)
	if got != out {
		t.Errorf("task get:\n%s\nenqueue:\n%s", got, out)
	}

	// --process-at and the server's defaults.
	at := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	kv = parseListing(t, mustRun(t, "enqueue", "--addr", s.URL(), "--process-at", at.Format(time.RFC3339), "report"))
	if kv["state"] != "scheduled" || kv["next_process_at"] != at.Local().Format(time.RFC3339) ||
		kv["queue"] != "default" || kv["priority"] != "4" || kv["retried"] != "0/25" ||
		kv["payload"] != "(empty)" || kv["content_type"] != "application/json" {
		t.Errorf("--process-at task: %v", kv)
	}
}

func TestJSONOutput(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	out := mustRun(t, "enqueue", "--addr", s.URL(), "--json", "--queue", "q", "--retention", "0s", "t", `{"n":1}`)
	var enq conveyorv1.TaskInfo
	if err := protojson.Unmarshal([]byte(out), &enq); err != nil {
		t.Fatalf("--json output is not a TaskInfo: %v\n%s", err, out)
	}
	info, err := sdkClient(t, s).GetTask(context.Background(), enq.GetId())
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&enq, info.Proto()) {
		t.Errorf("--json printed %v, the server has %v", &enq, info.Proto())
	}

	out = mustRun(t, "task", "get", "--addr", s.URL(), "--json", enq.GetId())
	var fields map[string]any
	if err := json.Unmarshal([]byte(out), &fields); err != nil {
		t.Fatalf("task get --json: %v\n%s", err, out)
	}
	// Every field is present, zero or not, so scripts can rely on the keys;
	// the encoding is the proto3 JSON mapping.
	for k, want := range map[string]any{
		"id": enq.GetId(), "queue": "q", "state": "TASK_STATE_PENDING", "retried": float64(0),
		"payload": "eyJuIjoxfQ==", "lastError": "", "completedAt": nil,
	} {
		if got, ok := fields[k]; !ok || got != want {
			t.Errorf("%s = %#v (present %v), want %#v", k, got, ok, want)
		}
	}
	if r := fields["options"].(map[string]any)["retention"]; r != "0s" {
		t.Errorf("options.retention = %#v, want \"0s\"", r)
	}
}

func TestEnqueuePayloadSources(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	c := sdkClient(t, s)
	stored := func(out string) []byte {
		t.Helper()
		var m conveyorv1.TaskInfo
		if err := protojson.Unmarshal([]byte(out), &m); err != nil {
			t.Fatal(err)
		}
		info, err := c.GetTask(context.Background(), m.GetId())
		if err != nil {
			t.Fatal(err)
		}
		return info.Payload
	}

	binary := "\x00\xffbinary"
	out, err := runCLI(t, binary, "enqueue", "--addr", s.URL(), "--content-type", "application/octet-stream", "--json", "t", "-")
	if err != nil {
		t.Fatal(err)
	}
	if got := stored(out); string(got) != binary {
		t.Errorf("payload from stdin: %q", got)
	}
	out, err = runCLI(t, "from stdin", "enqueue", "--addr", s.URL(), "--content-type", "text/plain", "--json", "--payload-file", "-", "t")
	if err != nil {
		t.Fatal(err)
	}
	if got := stored(out); string(got) != "from stdin" {
		t.Errorf("--payload-file -: %q", got)
	}
	file := filepath.Join(t.TempDir(), "payload.json")
	if err := os.WriteFile(file, []byte("{\n  \"a\": 1\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := stored(mustRun(t, "enqueue", "--addr", s.URL(), "--json", "--payload-file", file, "t")); string(got) != "{\n  \"a\": 1\n}\n" {
		t.Errorf("--payload-file: %q", got)
	}

	// The listing shows printable text (multi-line under its first line),
	// the size of anything else, and the start of a long payload.
	kv := parseListing(t, mustRun(t, "enqueue", "--addr", s.URL(), "--payload-file", file, "t"))
	if kv["payload"] != "{\n\"a\": 1\n}" {
		t.Errorf("multi-line payload listed as %q", kv["payload"])
	}
	out, err = runCLI(t, binary, "enqueue", "--addr", s.URL(), "--content-type", "application/octet-stream", "t", "-")
	if err != nil {
		t.Fatal(err)
	}
	if kv := parseListing(t, out); kv["payload"] != "(8 bytes, not printable)" {
		t.Errorf("binary payload listed as %q", kv["payload"])
	}
	long := strings.Repeat("é", 400) // 800 bytes
	kv = parseListing(t, mustRun(t, "enqueue", "--addr", s.URL(), "--content-type", "text/plain", "t", long))
	if want := strings.Repeat("é", 256) + "… (800 bytes)"; kv["payload"] != want {
		t.Errorf("long payload listed as %q, want %q", kv["payload"], want)
	}

	_, err = runCLI(t, "", "enqueue", "--addr", s.URL(), "--payload-file", file, "t", "inline")
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("payload argument and --payload-file: %v", err)
	}
	_, err = runCLI(t, "", "enqueue", "--addr", s.URL(), "--payload-file", filepath.Join(t.TempDir(), "missing"), "t")
	if err == nil || !strings.Contains(err.Error(), "--payload-file") {
		t.Errorf("missing --payload-file: %v", err)
	}
}

// TestCLIErrors checks that failures return the server's message (main
// prints it) and the documented exit code.
func TestCLIErrors(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{Token: "s3cret"})
	id := ulid.Make().String()
	mustRun(t, "enqueue", "--addr", s.URL(), "--token", "s3cret", "--task-id", id, "t")
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(emptyFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		msg  string
		code int
	}{
		{"duplicate id", []string{"enqueue", "--addr", s.URL(), "--token", "s3cret", "--task-id", id, "t"}, "task " + id + ": already exists", exitRefused},
		{"unknown id", []string{"task", "get", "--addr", s.URL(), "--token", "s3cret", ulid.Make().String()}, "not found", exitNotFound},
		{"invalid priority", []string{"enqueue", "--addr", s.URL(), "--token", "s3cret", "--priority", "42", "t"}, "options.priority must be 1..9", exitRefused},
		{"ttl without key", []string{"enqueue", "--addr", s.URL(), "--token", "s3cret", "--unique-ttl", "1m", "t"}, "unique_ttl requires options.unique_key", exitRefused},
		{"no token", []string{"task", "get", "--addr", s.URL(), "--token=", id}, "missing bearer token", exitAuth}, // "--token=" overrides $CONVEYOR_TOKEN
		{"wrong token", []string{"enqueue", "--addr", s.URL(), "--token", "nope", "t"}, "invalid bearer token", exitAuth},
		{"token and token file", []string{"task", "get", "--addr", s.URL(), "--token", "s3cret", "--token-file", tokenFile, id}, "mutually exclusive", exitUsage},
		{"empty token file", []string{"task", "get", "--addr", s.URL(), "--token=", "--token-file", emptyFile, id}, "is empty", exitUsage},
		{"bad address", []string{"task", "get", "--addr", "127.0.0.1:7420", id}, "must be an http:// or https:// URL", exitUsage},
		{"no server", []string{"task", "get", "--addr", closedAddr(t), id}, "unavailable", exitUnavailable},
		{"bad time", []string{"enqueue", "--addr", s.URL(), "--process-at", "tomorrow", "t"}, "--process-at", exitUsage},
		// Past the wire's int32: a command line that does not parse, as for
		// cron create, not a failure of the SDK's (exit 1).
		{"priority past int32", []string{"enqueue", "--addr", s.URL(), "--priority", "3000000000", "t"}, "--priority", exitUsage},
		{"max retry past int32", []string{"enqueue", "--addr", s.URL(), "--max-retry", "3000000000", "t"}, "--max-retry", exitUsage},
		{"payload twice", []string{"enqueue", "--addr", s.URL(), "--payload-file", tokenFile, "t", "inline"}, "not both", exitUsage},
	} {
		out, err := runCLI(t, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.msg)
		}
		if got := exitCode(err); got != tc.code {
			t.Errorf("%s: exit code %d, want %d (%v)", tc.name, got, tc.code, err)
		}
		if out != "" {
			t.Errorf("%s: printed %q on failure", tc.name, out)
		}
	}
	// The token file holds the right token.
	if kv := parseListing(t, mustRun(t, "task", "get", "--addr", s.URL(), "--token=", "--token-file", tokenFile, id)); kv["id"] != id {
		t.Errorf("task get with --token-file: %v", kv)
	}
}

// closedAddr is the URL of a loopback port nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr
}

// TestClientFlagsFromEnv cannot run in parallel: it sets the environment.
func TestClientFlagsFromEnv(t *testing.T) {
	s := servertest.Start(t, server.Config{Token: "env-token"})
	t.Setenv("CONVEYOR_ADDR", s.URL())
	t.Setenv("CONVEYOR_TOKEN", "env-token")
	kv := parseListing(t, mustRun(t, "enqueue", "from-env"))
	if kv["type"] != "from-env" {
		t.Fatalf("enqueue with the environment's address and token: %v", kv)
	}
	if kv = parseListing(t, mustRun(t, "task", "get", kv["id"])); kv["type"] != "from-env" {
		t.Errorf("task get with the environment's address and token: %v", kv)
	}
	// A flag before the command wins over the environment, as one after it does.
	t.Setenv("CONVEYOR_ADDR", closedAddr(t))
	if kv = parseListing(t, mustRun(t, "--addr", s.URL(), "task", "get", kv["id"])); kv["type"] != "from-env" {
		t.Errorf("task get with --addr before the command: %v", kv)
	}
}

// TestClientFlagsBeforeCommand: the connection flags may come before the
// command, as asynq's --uri does, and mean the same there.
func TestClientFlagsBeforeCommand(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{Token: "s3cret"})
	mustRun(t, "--addr", s.URL(), "--token", "s3cret", "enqueue", "--queue", "emails", "t")
	after := mustRun(t, "queue", "ls", "--addr", s.URL(), "--token", "s3cret")
	if before := mustRun(t, "--addr", s.URL(), "--token", "s3cret", "queue", "ls"); before != after || !strings.Contains(before, "emails") {
		t.Errorf("queue ls with the flags before it:\n%s\nafter it:\n%s", before, after)
	}
	out := mustRun(t, "--addr="+s.URL(), "--json", "--token=s3cret", "queue", "ls")
	var queues []map[string]any
	if err := json.Unmarshal([]byte(out), &queues); err != nil || len(queues) != 1 {
		t.Errorf("--json before the command: %v\n%s", err, out)
	}
	// The later flag wins: after the command over before it.
	if out := mustRun(t, "--addr", closedAddr(t), "--token", "nope", "queue", "ls", "--addr", s.URL(), "--token", "s3cret"); out != after {
		t.Errorf("flags after the command did not win:\n%s", out)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := mustRun(t, "--token-file", tokenFile, "queue", "ls", "--addr", s.URL()); out != after {
		t.Errorf("--token-file before the command:\n%s", out)
	}

	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--addr", s.URL(), "server"}, "`conveyor server` takes its own flags"},
		{[]string{"--token", "x", "completion", "bash"}, "`conveyor completion` takes its own flags"},
		{[]string{"--json", "version"}, "--json before the command applies to the commands that call a server"},
		{[]string{"queue", "ls", "--addr"}, "--addr"},
		{[]string{"--addr"}, "--addr needs a value"},
		{[]string{"--json=maybe", "queue", "ls"}, "want true or false"},
		{[]string{"--addr", s.URL(), "--nope", "queue", "ls"}, "unknown flag --nope"},
	} {
		_, err := runCLI(t, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || exitCode(err) != exitUsage {
			t.Errorf("%q: %v (exit %d), want a usage error saying %q", tc.args, err, exitCode(err), tc.msg)
		}
	}
}

// TestHelpListsExitCodes: scripts' authors find the exit codes in --help.
func TestHelpListsExitCodes(t *testing.T) {
	t.Parallel()
	var c cli
	var stdout bytes.Buffer
	exited := -1
	parser, err := newParser(&c, strings.NewReader(""), kong.Writers(&stdout, &stdout), kong.Exit(func(code int) { exited = code }))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = parser.Parse([]string{"--help"})
	if exited != 0 || !strings.Contains(stdout.String(), exitHelp) {
		t.Errorf("--help exited %d and printed:\n%s", exited, stdout.String())
	}
}

func TestEnqueueGroupAndConcurrencyKey(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	kv := parseListing(t, mustRun(t, "enqueue", "--addr", s.URL(), "--group", "daily", "agg"))
	if kv["state"] != "aggregating" || kv["group"] != "daily" {
		t.Errorf("enqueue --group: %v", kv)
	}
	kv = parseListing(t, mustRun(t, "enqueue", "--addr", s.URL(), "--concurrency-key", "tenant-1", "t"))
	if kv["state"] != "pending" || kv["concurrency_key"] != "tenant-1" {
		t.Errorf("enqueue --concurrency-key: %v", kv)
	}
	if _, err := runCLI(t, "", "enqueue", "--addr", s.URL(), "--group", "g", "--concurrency-key", "k", "t"); exitCode(err) != exitRefused {
		t.Errorf("--group with --concurrency-key: %v (exit %d)", err, exitCode(err))
	}
}

// TestServerBrokerFlags: the engine flags that do not go together are
// refused with what to do instead, and an unreachable database is named
// (its password redacted); nothing starts.
func TestServerBrokerFlags(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"server", "--data-dir", dir, "--broker", "postgres"}, "--broker postgres needs --database-url"},
		{[]string{"server", "--data-dir", dir, "--database-url", "postgres://localhost/conveyor"}, "--database-url applies to --broker postgres only"},
		{[]string{"server", "--data-dir", dir, "--broker", "postgres", "--database-url", "postgres://u:s3cret@127.0.0.1:1/conveyor"},
			"connect to postgres://u:xxxxx@127.0.0.1:1/conveyor"},
	} {
		_, err := runCLI(t, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%v: %v, want an error saying %q", tc.args, err, tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("a refused server created %d files in its data dir", len(entries))
	}
}

// TestEnqueueChecksJSON: a JSON payload (the default content type) that
// does not parse is refused before any call, with exit code 2; other
// content types carry any bytes.
func TestEnqueueChecksJSON(t *testing.T) {
	t.Parallel()
	closed := closedAddr(t) // a call would fail with exitUnavailable instead
	for _, tc := range []struct {
		stdin string
		args  []string
		msg   string
	}{
		{"", []string{"t", "not json"}, "payload is not valid JSON: invalid character 'o' in literal null (expecting 'u') at byte 2; use --content-type to send other bytes"},
		{"", []string{"t", `{"a":1} x`}, "invalid character 'x' after top-level value"},
		{"{", []string{"t", "-"}, "payload is not valid JSON: unexpected end of JSON input"},
		{"", []string{"--content-type", "application/json; charset=utf-8", "t", "{'a':1}"}, "payload is not valid JSON"},
		{"", []string{"--content-type", "application/vnd.api+json", "t", "nope"}, "payload is not valid JSON"},
	} {
		out, err := runCLI(t, tc.stdin, append([]string{"enqueue", "--addr", closed}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || exitCode(err) != exitRefused || out != "" {
			t.Errorf("%q: %v (exit %d, printed %q), want exit %d saying %q", tc.args, err, exitCode(err), out, exitRefused, tc.msg)
		}
	}

	s := servertest.Start(t, server.Config{})
	for _, args := range [][]string{
		{"--content-type", "text/plain", "t", "not json"},
		{"t", `{"to": "ada"}`},
		{"t", `"a string"`},
		{"t"}, // no payload
	} {
		if _, err := runCLI(t, "", append([]string{"enqueue", "--addr", s.URL()}, args...)...); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}
