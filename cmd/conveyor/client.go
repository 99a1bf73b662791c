package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protojson"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// clientFlags are the flags of every command that calls a server.
type clientFlags struct {
	Addr  string `default:"http://127.0.0.1:7420" env:"CONVEYOR_ADDR" help:"Server URL: http:// (HTTP/2 without TLS) or https://."`
	Token string `env:"CONVEYOR_TOKEN" help:"Bearer token, if the server requires one."`
	JSON  bool   `name:"json" help:"Print the task as protojson (every field, for scripts)."`
}

func (f *clientFlags) client() (*conveyor.Client, error) {
	var opts []conveyor.Option
	if f.Token != "" {
		opts = append(opts, conveyor.WithToken(f.Token))
	}
	return conveyor.NewClient(f.Addr, opts...)
}

// callContext is the context of a command's calls: canceled by Ctrl-C.
func callContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt)
}

// printTask writes info to w: protojson with --json, else a short aligned
// key/value listing for people.
func (f *clientFlags) printTask(w io.Writer, info *conveyor.TaskInfo) error {
	if f.JSON {
		b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", EmitUnpopulated: true}.Marshal(info.Proto())
		if err != nil {
			return fmt.Errorf("encode the task as JSON: %w", err)
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	var l listing
	l.add("id", info.ID)
	l.add("queue", info.Queue)
	l.add("type", info.Type)
	l.add("state", info.State.String())
	l.add("priority", fmt.Sprint(info.Priority))
	l.add("retried", fmt.Sprintf("%d/%d", info.Retried, info.MaxRetry))
	l.addIf("last_error", info.LastError)
	l.add("content_type", info.ContentType)
	l.add("payload", showBytes(info.Payload))
	if len(info.Metadata) > 0 {
		keys := make([]string, 0, len(info.Metadata))
		for k := range info.Metadata {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		pairs := make([]string, len(keys))
		for i, k := range keys {
			pairs[i] = k + "=" + info.Metadata[k]
		}
		l.add("metadata", strings.Join(pairs, ", "))
	}
	l.addTime("enqueued_at", info.EnqueuedAt)
	l.addTime("next_process_at", info.NextProcessAt)
	l.addTime("started_at", info.StartedAt)
	l.addTime("completed_at", info.CompletedAt)
	l.addTime("expires_at", info.ExpiresAt)
	l.addTime("deadline", info.Options.Deadline)
	l.addIf("group", info.Group)
	l.addIf("concurrency_key", info.ConcurrencyKey)
	l.addIf("unique_key", info.Options.UniqueKey)
	for _, d := range info.DependsOn {
		l.add("depends_on", d.TaskID+" (on failure: "+onFailure(d.OnFailure)+")")
	}
	if info.ProgressPercent != 0 || info.ProgressMessage != "" {
		l.add("progress", strings.TrimSpace(fmt.Sprintf("%d%% %s", info.ProgressPercent, info.ProgressMessage)))
	}
	if len(info.Result) > 0 {
		l.add("result", showBytes(info.Result))
	}
	return l.write(w)
}

func onFailure(f conveyor.OnFailure) string {
	if f == conveyor.OnFailureUnspecified {
		return conveyor.OnFailureBlock.String()
	}
	return f.String()
}

// listing is a key/value listing with the values aligned in one column.
type listing struct{ keys, values []string }

func (l *listing) add(k, v string) {
	l.keys = append(l.keys, k)
	l.values = append(l.values, v)
}

func (l *listing) addIf(k, v string) {
	if v != "" {
		l.add(k, v)
	}
}

func (l *listing) addTime(k string, t time.Time) {
	if !t.IsZero() {
		l.add(k, t.Local().Format(time.RFC3339))
	}
}

func (l *listing) write(w io.Writer) error {
	width := 0
	for _, k := range l.keys {
		width = max(width, len(k))
	}
	var b strings.Builder
	for i, k := range l.keys {
		// A multi-line value continues under its first line.
		lines := strings.Split(l.values[i], "\n")
		fmt.Fprintf(&b, "%-*s  %s\n", width, k, lines[0])
		for _, line := range lines[1:] {
			fmt.Fprintf(&b, "%*s  %s\n", width, "", line)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// maxShownBytes bounds how much of a payload or result the listing shows.
const maxShownBytes = 512

// showBytes is b as text when it is printable UTF-8 (without its final
// line break), else its size.
func showBytes(b []byte) string {
	if len(b) == 0 {
		return "(empty)"
	}
	if !printable(b) {
		return fmt.Sprintf("(%d bytes, not printable)", len(b))
	}
	if len(b) <= maxShownBytes {
		return strings.TrimRight(string(b), "\r\n")
	}
	cut := maxShownBytes
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return fmt.Sprintf("%s… (%d bytes)", b[:cut], len(b))
}

// printable reports whether b is valid UTF-8 made of printable characters,
// spaces, tabs and line breaks.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if !unicode.IsPrint(r) && r != '\n' && r != '\t' && r != '\r' {
			return false
		}
	}
	return true
}
