package main

import (
	"testing"

	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestCLIEmptyListings: a listing with nothing in it says so in words (a
// bare header reads as a failure); with --json it is still "[]".
func TestCLIEmptyListings(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"queue", "ls"}, "no queues\n"},
		{[]string{"cron", "ls"}, "no cron entries\n"},
		{[]string{"group", "ls"}, "no aggregation groups waiting\n"},
		{[]string{"group", "ls", "--queue", "emails"}, "no aggregation groups waiting in queue emails\n"},
		{[]string{"workers"}, "no workers connected\n"},
		{[]string{"release", "ls"}, "no worker releases seen\n"},
		{[]string{"task", "ls"}, "no tasks in any queue\n"},
		{[]string{"task", "ls", "--queue", "emails", "--state", "retry"}, "no retrying tasks in queue emails\n"},
		{[]string{"task", "ls", "--queue", "emails", "--state", "pending", "--type", "welcome", "--group", "daily", "--search", "ada"},
			"no pending tasks of type welcome in group daily containing \"ada\" in queue emails\n"},
		{[]string{"task", "ls", "--state", "archived"}, "no archived tasks in any queue\n"},
	} {
		out, stderr, err := runCLIFull(t, "", append(tc.args, addr)...)
		if err != nil || out != tc.want || stderr != "" {
			t.Errorf("%q: printed %q (stderr %q, %v), want %q", tc.args, out, stderr, err, tc.want)
		}
		if out := mustRun(t, append(tc.args, addr, "--json")...); out != "[]\n" {
			t.Errorf("%q --json: printed %q, want []", tc.args, out)
		}
	}
}
