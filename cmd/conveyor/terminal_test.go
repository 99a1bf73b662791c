package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/alecthomas/kong"
	"google.golang.org/protobuf/encoding/protojson"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func TestSafeText(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"plain text, é € 日本 😀", "plain text, é € 日本 😀"},
		{"a\x1b[31mred", `a\x1b[31mred`},
		{"\x1b]0;title\x07", `\x1b]0;title\x07`},
		{"tab\there\nline\r\n", `tab\there\nline\r\n`},
		{"\x00\x7f", `\x00\x7f`},
		{"c1 \u009b2J \u0085", `c1 \u009b2J \u0085`},
		{"bidi \u202eevil\u202c \u2066x\u2069", `bidi \u202eevil\u202c \u2066x\u2069`},
		{"sep \u2028 \u2029", `sep \u2028 \u2029`},
		{"bad \xff\xc2 utf8", `bad \xff\xc2 utf8`},
		{"\xc2\x9b", `\u009b`}, // C1 CSI as UTF-8
		{"a\\x1b", `a\x1b`},    // a backslash is kept as it is
	} {
		if got := safeText(tc.in); got != tc.want {
			t.Errorf("safeText(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestJSONSafe: the characters JSON encoders leave raw come out as \u
// escapes, and the JSON decodes to the same value.
func TestJSONSafe(t *testing.T) {
	t.Parallel()
	in := "x\x1b]0;t\x07\u009b\u202e\x7f\u2028é\n"
	b, err := json.Marshal(map[string]string{"k": in})
	if err != nil {
		t.Fatal(err)
	}
	out := jsonSafe(b)
	assertTerminalSafe(t, "jsonSafe", string(out))
	var back map[string]string
	if err := json.Unmarshal(out, &back); err != nil || back["k"] != in {
		t.Errorf("jsonSafe(%s) = %s, decoding to %q (%v)", b, out, back["k"], err)
	}
	if plain := []byte(`{"a": "é"}`); &jsonSafe(plain)[0] != &plain[0] {
		t.Error("jsonSafe copied JSON that needed nothing")
	}
}

// TestReportErrorTerminalSafe: a command's error, which may quote the
// server, is printed escaped.
func TestReportErrorTerminalSafe(t *testing.T) {
	t.Parallel()
	var c cli
	var stderr bytes.Buffer
	parser, err := newParser(&c, strings.NewReader(""), kong.Writers(io.Discard, &stderr))
	if err != nil {
		t.Fatal(err)
	}
	ctx, err := parser.Parse([]string{"version"})
	if err != nil {
		t.Fatal(err)
	}
	reportError(ctx, errors.New("not found: "+nasty))
	assertTerminalSafe(t, "the error", stderr.String())
	if !strings.Contains(stderr.String(), safeText(nasty)) {
		t.Errorf("the error printed as %q", stderr.String())
	}
}

// nasty is text a client stored to act on the terminal that prints it: a
// window title, a clear screen, a hyperlink, a C1 CSI, a bidi override, a
// DEL, a carriage return that would overwrite the line, a tab and a line
// break that would break a table.
const nasty = "x\x1b]0;pwned\x07\x1b[2J\x1b]8;;http://evil/\x1b\\link\x1b]8;;\x1b\\\u009b31m\u202eright\u2066\x7f\rover\tz\nfake"

// TestCLIOutputTerminalSafe stores nasty in everything the CLI prints
// (task type, metadata, group and keys, payload, progress message, last
// error, result, a worker's labels, a cron entry's type, metadata and
// payload) and runs every command that prints them: no output holds a
// raw ESC, BEL, C1 control, bidi control or invalid UTF-8; tables stay
// aligned; the listing shows the escaped text; JSON carries the text
// exactly.
func TestCLIOutputTerminalSafe(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	addr := "--addr=" + s.URL()
	typ := "t" + nasty
	startNastyWorker(t, s, typ)

	failing := enqueueID(t, addr, "--content-type", "text/plain", "--queue", "q", "--metadata", nasty+"="+nasty, "--concurrency-key", nasty,
		"--unique", nasty, typ, nasty)
	held := enqueueID(t, addr, "--content-type", "text/plain", "--queue", "q", "hold", "line one\rover\nline two")
	done := enqueueID(t, addr, "--queue", "q", "result")
	enqueueID(t, addr, "--queue", "g", "--group", nasty, typ)
	waitState(t, s, failing, "retry")
	waitState(t, s, done, "completed")
	servertest.Eventually(t, 10*time.Second, "the held task's progress", func() bool {
		info, err := sdkClient(t, s).GetTask(context.Background(), held)
		return err == nil && info.Proto().GetProgressMessage() == nasty
	})
	mustRun(t, "cron", "create", addr, "--id", "c1", "--queue", "q", "--metadata", nasty+"="+nasty, "@hourly", typ, nasty)

	outputs := map[string][]string{
		"task ls":  {"task", "ls", addr, "--queue", "q", "--state", "all"},
		"task get": {"task", "get", addr, failing},
		"held":     {"task", "get", addr, held},
		"result":   {"task", "get", addr, done},
		"enqueue":  {"enqueue", addr, "--content-type", "text/plain", "--queue", "q2", "--metadata", "k=" + nasty, typ, "text\rover"},
		"cron ls":  {"cron", "ls", addr},
		"cron get": {"cron", "get", addr, "c1"},
		"workers":  {"workers", addr},
		"group ls": {"group", "ls", addr},
		"queue ls": {"queue", "ls", addr},
		"stats":    {"stats", addr, "--once"},
		"info":     {"info", addr},
	}
	tables := map[string]bool{"task ls": true, "cron ls": true, "workers": true, "group ls": true, "queue ls": true}
	for name, args := range outputs {
		for _, asJSON := range []bool{false, true} {
			if asJSON {
				args = append(args, "--json")
			}
			out, errOut, err := runCLIFull(t, "", args...)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			assertTerminalSafe(t, strings.Join(args, " "), out+errOut)
			if !asJSON && tables[name] {
				assertAligned(t, name, out)
			}
		}
	}

	kv := parseListing(t, mustRun(t, "task", "get", addr, failing))
	if want := safeText(typ); kv["type"] != want {
		t.Errorf("task get shows the type as %q, want %q", kv["type"], want)
	}
	if want := safeText(nasty); kv["concurrency_key"] != want {
		t.Errorf("task get shows concurrency_key %q, want %q", kv["concurrency_key"], want)
	}
	// An error is a block: its line break is the listing's, indented.
	first, second, _ := strings.Cut(nasty, "\n")
	if want := safeText(first) + "\n" + safeText(second); kv["last_error"] != want {
		t.Errorf("task get shows last_error %q, want %q", kv["last_error"], want)
	}
	if kv := parseListing(t, mustRun(t, "task", "get", addr, held)); kv["payload"] != "line one\\rover\nline two" ||
		kv["progress"] != "50% "+safeText(nasty) {
		t.Errorf("the held task's payload %q, progress %q", kv["payload"], kv["progress"])
	}
	var info conveyorv1.TaskInfo
	if err := protojson.Unmarshal([]byte(mustRun(t, "task", "get", addr, "--json", failing)), &info); err != nil {
		t.Fatal(err)
	}
	if info.GetType() != typ || info.GetLastError() != nasty || info.GetMetadata()[nasty] != nasty {
		t.Errorf("task get --json: type %q, last_error %q, metadata %q", info.GetType(), info.GetLastError(), info.GetMetadata())
	}
}

// startNastyWorker runs a worker labelled with nasty that fails tasks of
// typ with nasty as the error, holds "hold" tasks with nasty as their
// progress message, and completes "result" tasks with a result that has a
// carriage return.
func startNastyWorker(t *testing.T, s *servertest.Server, typ string) {
	t.Helper()
	w, err := conveyor.NewWorker(s.URL(), conveyor.WithQueue("q", 1), conveyor.WithConcurrency(4),
		conveyor.WithLabels(map[string]string{nasty: nasty}), conveyor.WithDrainGrace(0),
		conveyor.WithProgressInterval(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	w.HandleFunc(typ, func(context.Context, *conveyor.Delivery) error { return errors.New(nasty) })
	w.HandleFunc("hold", func(ctx context.Context, d *conveyor.Delivery) error {
		d.Progress(50, nasty)
		<-ctx.Done()
		return ctx.Err()
	})
	w.HandleFunc("result", func(_ context.Context, d *conveyor.Delivery) error {
		d.SetResult([]byte("done\rfake"))
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- w.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("worker: %v", err)
		}
	})
}

// assertTerminalSafe fails the test when out holds anything that acts on
// a terminal: invalid UTF-8, an ESC, a BEL or another C0 control but a line
// break, a DEL, a C1 control, or a bidi control.
func assertTerminalSafe(t *testing.T, name, out string) {
	t.Helper()
	if !utf8.ValidString(out) {
		t.Errorf("%s: the output is not valid UTF-8:\n%q", name, out)
		return
	}
	for i, r := range out {
		if r < 0x20 && r != '\n' || r == 0x7f || unsafeRune(r) && r != 0x2028 && r != 0x2029 {
			t.Errorf("%s: raw %U at byte %d:\n%q", name, r, i, out)
			return
		}
	}
}

// assertAligned checks that every line of a table has its columns where
// the header has them: each column starts after two spaces, on text.
// Positions count runes, as the table's widths do.
func assertAligned(t *testing.T, name, out string) {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	header := []rune(lines[0])
	var starts []int
	for i := 2; i < len(header); i++ {
		if header[i] != ' ' && header[i-1] == ' ' && header[i-2] == ' ' {
			starts = append(starts, i)
		}
	}
	for _, line := range lines[1:] {
		row := []rune(line)
		for _, p := range starts {
			if p >= len(row) || row[p] == ' ' || row[p-1] != ' ' {
				t.Errorf("%s: the row %q does not start a column at %d:\n%s", name, line, p, out)
				break
			}
		}
	}
}
