package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func TestGroupLs(t *testing.T) {
	t.Parallel()
	// Groups that do not fire while the test looks at them.
	s := servertest.Start(t, server.Config{GroupPolicy: broker.GroupPolicy{MaxSize: 1000, MaxDelay: time.Hour, GracePeriod: time.Hour}})
	addr := "--addr=" + s.URL()
	if out := mustRun(t, "group", "ls", addr, "--json"); out != "[]\n" {
		t.Errorf("no groups: %q", out)
	}
	for range 3 {
		enqueueID(t, addr, "--queue", "a", "--group", "daily", "digest")
	}
	enqueueID(t, addr, "--queue", "b", "--group", "hourly", "digest")

	golden(t, "group_ls", mustRun(t, "group", "ls", addr))
	var groups []struct {
		Queue, Group, Type string
		Size               int
	}
	if err := json.Unmarshal([]byte(mustRun(t, "group", "ls", addr, "--queue", "a", "--json")), &groups); err != nil {
		t.Fatal(err)
	}
	if len(groups) != 1 || groups[0].Queue != "a" || groups[0].Group != "daily" || groups[0].Type != "digest" || groups[0].Size != 3 {
		t.Errorf("group ls --queue a: %+v", groups)
	}
	if _, err := runCLI(t, "", "group", "ls", addr, "--queue", "a/b"); exitCode(err) != exitRefused {
		t.Errorf("group ls on a bad queue name: %v (exit %d)", err, exitCode(err))
	}
}
