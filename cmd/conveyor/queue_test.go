package main

import (
	"encoding/json"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestQueueCommands runs on the embedded engine whatever the test engine:
// its goldens hold bbolt's NO WORKER FOR, which lists only the types a
// routed lease passed over, where PostgreSQL lists every waiting type
// (both as broker.KindLister allows).
func TestQueueCommands(t *testing.T) {
	t.Parallel()
	s := servertest.StartBolt(t, server.Config{})
	addr := "--addr=" + s.URL()
	mustRun(t, "enqueue", addr, "--queue", "alpha", "t")
	mustRun(t, "enqueue", addr, "--queue", "alpha", "t")
	mustRun(t, "enqueue", addr, "--queue", "alpha", "--process-in", "1h", "t")
	mustRun(t, "enqueue", addr, "--queue", "beta", "t")

	golden(t, "queue_pause", mustRun(t, "queue", "pause", addr, "beta"))
	golden(t, "queue_ls", mustRun(t, "queue", "ls", addr))
	golden(t, "queue_ls_wide", mustRun(t, "queue", "ls", addr, "--wide"))
	golden(t, "queue_ls_json", mustRun(t, "queue", "ls", addr, "--json"))

	var qs []map[string]any
	if err := json.Unmarshal([]byte(mustRun(t, "queue", "resume", addr, "--json", "beta")), &qs); err == nil {
		t.Errorf("queue resume --json printed a list, want one object")
	}
	if out := mustRun(t, "queue", "ls", addr, "--json"); !strings.Contains(out, `"paused": false`) || strings.Contains(out, `"paused": true`) {
		t.Errorf("beta still paused after resume:\n%s", out)
	}
}

// TestQueueDelete: an empty queue is deleted; one holding a task is
// refused (exit 2) saying what it holds; an unknown one exits 3.
func TestQueueDelete(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()
	mustRun(t, "queue", "pause", addr, "empty")
	mustRun(t, "enqueue", addr, "--queue", "busy", "t")
	if out := mustRun(t, "queue", "delete", addr, "empty"); out != "deleted queue empty\n" {
		t.Errorf("queue delete printed %q", out)
	}
	if out := mustRun(t, "queue", "ls", addr, "--json"); strings.Contains(out, `"empty"`) {
		t.Errorf("the deleted queue is still listed:\n%s", out)
	}
	mustRun(t, "queue", "pause", addr, "again")
	var got struct {
		Queue   string `json:"queue"`
		Deleted bool   `json:"deleted"`
	}
	if err := json.Unmarshal([]byte(mustRun(t, "queue", "delete", addr, "--json", "again")), &got); err != nil || got.Queue != "again" || !got.Deleted {
		t.Errorf("queue delete --json: %+v, %v", got, err)
	}
	for _, tc := range []struct {
		name, queue, msg string
		code             int
	}{
		{"busy", "busy", `queue "busy" still holds 1 task (1 pending); delete them first`, exitRefused},
		{"unknown", "empty", `queue "empty": not found`, exitNotFound},
		{"bad name", "no/slash", "is invalid", exitRefused},
	} {
		out, err := runCLI(t, "", "queue", "delete", addr, tc.queue)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || exitCode(err) != tc.code || out != "" {
			t.Errorf("%s: error %v (exit %d), printed %q; want %q, exit %d", tc.name, err, exitCode(err), out, tc.msg, tc.code)
		}
	}
}

func TestQueueConfig(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()
	golden(t, "queue_config_defaults", mustRun(t, "queue", "config", addr, "alpha"))
	golden(t, "queue_config_set", mustRun(t, "queue", "config", addr, "alpha",
		"--concurrency-limit", "3", "--max-active", "10", "--rate", "5", "--group-max-size", "7",
		"--group-max-delay", "1m", "--group-grace-period", "2s", "--max-waiting", "1000"))

	// Unspecified flags keep their values; a burst that was the default
	// follows a new rate.
	kv := parseListing(t, mustRun(t, "queue", "config", addr, "alpha", "--rate", "8"))
	for k, want := range map[string]string{
		"concurrency_limit": "3", "max_active": "10", "rate_limit": "8/s, burst 8",
		"group_max_size": "7", "group_max_delay": "1m0s", "group_grace_period": "2s", "max_waiting": "1000",
	} {
		if kv[k] != want {
			t.Errorf("after --rate 8: %s = %q, want %q", k, kv[k], want)
		}
	}
	// An explicit burst stays when the rate changes.
	mustRun(t, "queue", "config", addr, "alpha", "--burst", "20")
	if kv := parseListing(t, mustRun(t, "queue", "config", addr, "alpha", "--rate", "9")); kv["rate_limit"] != "9/s, burst 20" {
		t.Errorf("an explicit burst did not stay: %q", kv["rate_limit"])
	}
	// 0 restores a default.
	if kv := parseListing(t, mustRun(t, "queue", "config", addr, "alpha", "--max-active", "0", "--rate", "0", "--burst", "0", "--max-waiting", "0")); kv["max_active"] != "none" || kv["rate_limit"] != "none" || kv["max_waiting"] != "none" {
		t.Errorf("0 did not restore the defaults: %v", kv)
	}
	golden(t, "queue_config_json", mustRun(t, "queue", "config", addr, "--json", "alpha"))

	// The push endpoint's flags; "" removes it. A server with no push
	// secret refuses a URL that is not loopback, naming the setting.
	kv = parseListing(t, mustRun(t, "queue", "config", addr, "gamma", "--push-url", "http://127.0.0.1:9/hook",
		"--push-concurrency", "3", "--push-timeout", "45s"))
	if kv["push"] != "http://127.0.0.1:9/hook, concurrency 3, timeout 45s" {
		t.Errorf("push after setting it: %q", kv["push"])
	}
	if kv = parseListing(t, mustRun(t, "queue", "config", addr, "gamma", "--push-url", "")); kv["push"] != "none" {
		t.Errorf("push after removing it: %q", kv["push"])
	}
	if _, err := runCLI(t, "", "queue", "config", addr, "gamma", "--push-url", "https://example.com/hook"); err == nil ||
		!strings.Contains(err.Error(), "config.push.url") || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("a public push URL on a server with no secret: %v", err)
	}

	// A change stores only what it names: the group policy of a queue
	// whose limits were set keeps following the server's defaults.
	mustRun(t, "queue", "config", addr, "beta", "--max-active", "4")
	admin := conveyorv1connect.NewAdminServiceClient(servertest.HTTPClient(), s.URL())
	stored, err := admin.GetQueueConfig(t.Context(), connect.NewRequest(&conveyorv1.GetQueueConfigRequest{Queue: "beta", Stored: true}))
	if err != nil {
		t.Fatal(err)
	}
	want := &conveyorv1.QueueConfig{Queue: "beta", MaxActive: 4, RateLimit: &conveyorv1.RateLimit{}, GroupPolicy: &conveyorv1.GroupPolicy{}}
	if !proto.Equal(stored.Msg, want) {
		t.Errorf("stored after --max-active 4: %v, want %v", stored.Msg, want)
	}

	for _, tc := range []struct {
		name string
		args []string
		msg  string
		code int
	}{
		{"negative", []string{"queue", "config", addr, "alpha", "--max-active=-1"}, "config.max_active must be", exitRefused},
		{"negative bound", []string{"queue", "config", addr, "alpha", "--max-waiting=-1"}, "config.max_waiting must be", exitRefused},
		{"bad name", []string{"queue", "config", addr, "no/slash"}, "is invalid", exitRefused},
		{"bad pause", []string{"queue", "pause", addr, "no/slash"}, "is invalid", exitRefused},
		{"not a number", []string{"queue", "config", addr, "alpha", "--rate", "fast"}, "--rate", exitUsage},
	} {
		out, err := runCLI(t, "", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.msg) || exitCode(err) != tc.code || out != "" {
			t.Errorf("%s: error %v (exit %d), printed %q; want %q, exit %d", tc.name, err, exitCode(err), out, tc.msg, tc.code)
		}
	}
}
