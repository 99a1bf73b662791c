package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// completionServer is a server holding queues, cron entries and tasks to
// complete: the ids of the tasks by queue, in id order.
type completionServer struct {
	s     *servertest.Server
	tasks map[string][]string
}

func startCompletionServer(t *testing.T) completionServer {
	t.Helper()
	s := servertest.Start(t, server.Config{Token: "s3cret"})
	c := sdkClient(t, s)
	cs := completionServer{s: s, tasks: map[string][]string{}}
	for q, n := range map[string]int{"emails": 3, "events": 2, "reports": 60} {
		for range n {
			info, err := c.Enqueue(context.Background(), "t", []byte(`{}`), conveyor.Queue(q))
			if err != nil {
				t.Fatal(err)
			}
			cs.tasks[q] = append(cs.tasks[q], info.ID)
		}
		slices.Sort(cs.tasks[q])
	}
	auth := []string{"--addr", s.URL(), "--token", "s3cret"}
	for _, id := range []string{"nightly-report", "nightly-backup", "hourly"} {
		mustRun(t, append(auth, "cron", "create", "--id", id, "@daily", "t")...)
	}
	return cs
}

// ids is every task id, sorted, or the last n when n > 0.
func (cs completionServer) ids(n int, queues ...string) []string {
	var all []string
	for _, q := range queues {
		all = append(all, cs.tasks[q]...)
	}
	slices.Sort(all)
	if n > 0 && len(all) > n {
		all = all[len(all)-n:]
	}
	return all
}

// completeWords runs __complete on words and returns the candidates,
// checking that it succeeds and says nothing on standard error.
func completeWords(t *testing.T, words ...string) []string {
	t.Helper()
	out, stderr, err := runCLIFull(t, "", append([]string{"__complete", "--"}, words...)...)
	if err != nil || stderr != "" {
		t.Fatalf("__complete %q: %v\n%s", words, err, stderr)
	}
	return strings.Fields(out)
}

func TestCompleteFromServer(t *testing.T) {
	t.Parallel()
	cs := startCompletionServer(t)
	auth := []string{"--addr", cs.s.URL(), "--token", "s3cret"}
	email := cs.tasks["emails"][1]
	for _, tc := range []struct {
		words []string
		want  []string
	}{
		{[]string{"queue", "pause", "e"}, []string{"emails", "events"}},
		{[]string{"queue", "resume", ""}, []string{"emails", "events", "reports"}},
		{[]string{"queue", "config", "rep"}, []string{"reports"}},
		{[]string{"queue", "delete", "x"}, nil},
		{[]string{"queue", "pause", "emails", ""}, nil}, // one queue only
		{[]string{"task", "ls", "--queue", "ev"}, []string{"events"}},
		{[]string{"task", "ls", "--queue=e"}, []string{"--queue=emails", "--queue=events"}},
		{[]string{"enqueue", "--queue", "r"}, []string{"reports"}},
		{[]string{"group", "ls", "--queue", "em"}, []string{"emails"}},
		{[]string{"task", "run", "--queue", "ev"}, []string{"events"}},
		{[]string{"cron", "create", "--queue", "re"}, []string{"reports"}},
		{[]string{"cron", "update", "--queue", "em"}, []string{"emails"}},
		{[]string{"cron", "get", "nightly-"}, []string{"nightly-backup", "nightly-report"}},
		{[]string{"cron", "pause", ""}, []string{"hourly", "nightly-backup", "nightly-report"}},
		{[]string{"cron", "resume", "h"}, []string{"hourly"}},
		{[]string{"cron", "update", "n"}, []string{"nightly-backup", "nightly-report"}},
		{[]string{"cron", "delete", "z"}, nil},
		// Task ids: of every queue, the 50 most recent.
		{[]string{"task", "get", ""}, cs.ids(maxTaskCandidates, "emails", "events", "reports")},
		{[]string{"task", "get", email}, []string{email}},
		{[]string{"task", "get", email[:len(email)-1]}, matchingIDs(cs.ids(0, "emails", "events", "reports"), email[:len(email)-1])},
		{[]string{"task", "cancel", "--queue", "emails", ""}, cs.ids(0, "emails")},
		{[]string{"task", "delete", "--queue=events", ""}, cs.ids(0, "events")},
		{[]string{"task", "archive", "--queue", "emails", cs.tasks["emails"][0], ""}, cs.ids(0, "emails")[1:]}, // not the one given
		{[]string{"task", "run", "NOPE"}, nil},
	} {
		got := completeWords(t, append(slices.Clone(auth), tc.words...)...)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%q: %q, want %q", tc.words, got, tc.want)
		}
	}

	// The connection flags after the command serve as well as before it.
	if got := completeWords(t, "queue", "pause", "--addr", cs.s.URL(), "--token=s3cret", "e"); !slices.Equal(got, []string{"emails", "events"}) {
		t.Errorf("flags after the command: %q", got)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := completeWords(t, "--token-file", tokenFile, "queue", "pause", "--addr="+cs.s.URL(), "em"); !slices.Equal(got, []string{"emails"}) {
		t.Errorf("--token-file: %q", got)
	}

	// A server that refuses or does not answer: no candidates, no message.
	for _, words := range [][]string{
		{"--addr", cs.s.URL(), "--token", "wrong", "queue", "pause", ""},
		{"--addr", cs.s.URL(), "queue", "pause", ""},
		{"--addr", closedAddr(t), "queue", "pause", ""},
		{"--addr", closedAddr(t), "task", "get", ""},
		{"--addr", "not a url", "cron", "get", ""},
		{"--addr", cs.s.URL(), "--token", "a", "--token-file", tokenFile, "queue", "pause", ""},
	} {
		if got := completeWords(t, words...); len(got) != 0 {
			t.Errorf("%q: %q, want none", words, got)
		}
	}
}

func matchingIDs(ids []string, prefix string) []string {
	return slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return !strings.HasPrefix(id, prefix) })
}

// TestCompleteFromServerEnv cannot run in parallel: it sets the
// environment, where completion finds the server as the commands do.
func TestCompleteFromServerEnv(t *testing.T) {
	cs := startCompletionServer(t)
	t.Setenv("CONVEYOR_ADDR", cs.s.URL())
	t.Setenv("CONVEYOR_TOKEN", "s3cret")
	if got := completeWords(t, "queue", "pause", "e"); !slices.Equal(got, []string{"emails", "events"}) {
		t.Errorf("with CONVEYOR_ADDR and CONVEYOR_TOKEN: %q", got)
	}
	if got := completeWords(t, "--token", "wrong", "cron", "get", ""); len(got) != 0 {
		t.Errorf("--token before the command did not win over CONVEYOR_TOKEN: %q", got)
	}
}

// TestBashCompletionFromServer presses Tab in bash, on the built binary,
// with the server in the environment.
func TestBashCompletionFromServer(t *testing.T) {
	t.Parallel()
	bin := conveyorBinary(t)
	cs := startCompletionServer(t)
	script := filepath.Join(t.TempDir(), "conveyor.bash")
	if err := os.WriteFile(script, []byte(completionScripts["bash"]), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ addr, line, want string }{
		{cs.s.URL(), "conveyor queue pause e", "emails events"},
		{cs.s.URL(), "conveyor task ls --queue=rep", "reports"},
		{cs.s.URL(), "conveyor cron get nightly-r", "nightly-report"},
		{closedAddr(t), "conveyor queue pause e", ""},
	} {
		cmd := exec.Command("bash", "--norc", "--noprofile", "-c", `source "$0"; COMP_LINE=$1; COMP_POINT=${#1}; _conveyor; printf '%s\n' "${COMPREPLY[@]}"`, script, tc.line)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
			"CONVEYOR_ADDR="+tc.addr, "CONVEYOR_TOKEN=s3cret")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.line, err, out)
		}
		if got := strings.Join(strings.Fields(string(out)), " "); got != tc.want {
			t.Errorf("%q completes to %q, want %q", tc.line, got, tc.want)
		}
	}
}

// TestCompleteReleases: release drain completes the releases of the
// workers the server has seen.
func TestCompleteReleases(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	for _, id := range []string{"v1.2", "v1.3", "v2.0"} {
		openWorker(t, s, &conveyorv1.Hello{Queues: map[string]int32{"default": 1}, Concurrency: 1, ReleaseId: id})
	}
	if got := completeWords(t, "--addr", s.URL(), "release", "drain", "v1"); !slices.Equal(got, []string{"v1.2", "v1.3"}) {
		t.Errorf("release drain v1: %q, want v1.2 v1.3", got)
	}
}

// TestCompleteTags: every complete tag names a kind completion knows, and
// the arguments and flags that name queues, cron entries and tasks carry
// one.
func TestCompleteTags(t *testing.T) {
	t.Parallel()
	var c cli
	parser, err := newParser(&c, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var walk func(*kong.Node)
	walk = func(n *kong.Node) {
		values := slices.Clone(n.Positional)
		for _, f := range n.Flags {
			values = append(values, f.Value)
		}
		for _, v := range values {
			if kind := v.Tag.Get("complete"); kind != "" {
				if _, ok := serverNames[kind]; !ok {
					t.Errorf("%s %s: complete:%q is no kind completion knows", n.FullPath(), v.Name, kind)
				}
				got[n.FullPath()+" "+v.Name] = kind
			}
		}
		for _, child := range n.Children {
			walk(child)
		}
	}
	walk(parser.Model.Node)
	want := map[string]string{
		"conveyor enqueue queue": "queue", "conveyor group ls queue": "queue", "conveyor task ls queue": "queue",
		"conveyor queue pause queue": "queue", "conveyor queue resume queue": "queue",
		"conveyor queue config queue": "queue", "conveyor queue delete queue": "queue",
		"conveyor cron create queue": "queue", "conveyor cron update queue": "queue",
		"conveyor cron get id": "cron", "conveyor cron update id": "cron", "conveyor cron delete id": "cron",
		"conveyor cron pause id": "cron", "conveyor cron resume id": "cron",
		"conveyor task get id":         "task",
		"conveyor queue history queue": "queue", "conveyor queue stats queue": "queue",
		"conveyor cron history id": "cron", "conveyor release drain release": "release",
	}
	for _, verb := range []string{"cancel", "delete", "run", "archive"} {
		want["conveyor task "+verb+" id"] = "task"
		want["conveyor task "+verb+" queue"] = "queue"
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("complete tags:\n%v\nwant\n%v", got, want)
	}
}
