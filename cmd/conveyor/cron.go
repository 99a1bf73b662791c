package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// cronCmd groups the commands on cron entries, one file each (cron_*.go).
type cronCmd struct {
	Ls      cronLsCmd      `cmd:"" help:"List the cron entries."`
	Get     cronGetCmd     `cmd:"" help:"Show one cron entry."`
	Create  cronCreateCmd  `cmd:"" help:"Create a cron entry: a task template enqueued on a schedule."`
	Update  cronUpdateCmd  `cmd:"" help:"Change some fields of a cron entry."`
	Delete  cronDeleteCmd  `cmd:"" help:"Delete a cron entry."`
	Pause   cronPauseCmd   `cmd:"" help:"Stop a cron entry from firing."`
	Resume  cronResumeCmd  `cmd:"" help:"Let a paused cron entry fire again."`
	History cronHistoryCmd `cmd:"" help:"List the tasks a cron entry fired that the server still keeps, with their states."`
}

// cronTemplateFlags are the task template of an entry, as create and update
// take it: the fields of enqueue that make sense for a task enqueued on a
// schedule (no fixed times, no task id). Pointers tell a flag not given
// (update keeps the field) from one set to its zero value (update clears it).
type cronTemplateFlags struct {
	Queue       *string           `placeholder:"QUEUE" help:"Queue of the fired tasks (server default: default)."`
	Priority    *int32            `placeholder:"N" help:"Priority, 1 (lowest) to 9 (highest) (server default: 4)."`
	MaxRetry    *int32            `name:"max-retry" placeholder:"N" help:"Retries before a fired task is archived (server default: 25)."`
	Timeout     *time.Duration    `placeholder:"DURATION" help:"Bound on one attempt (0s: none)."`
	Retention   *time.Duration    `placeholder:"DURATION" help:"How long to keep a fired task once completed; 0s purges it at once."`
	Unique      *string           `placeholder:"KEY" help:"Unique key of the fired tasks: while one holds it, another with the key is not enqueued."`
	UniqueTTL   *time.Duration    `name:"unique-ttl" placeholder:"DURATION" help:"How long the unique key is held (0s: until the task completes)."`
	Metadata    map[string]string `mapsep:"none" xor:"metadata" placeholder:"KEY=VALUE" help:"Metadata entry (repeatable); given, it replaces the entry's metadata."`
	ContentType *string           `name:"content-type" placeholder:"TYPE" help:"Payload content type (server default: application/json)."`
	PayloadFile string            `name:"payload-file" placeholder:"FILE" help:"Read the payload from FILE ('-' for standard input)."`
}

// apply sets the flags given on e, and payload when not nil, and returns
// the fields of CronEntry it set, as UpdateCron's update_mask names them.
func (f *cronTemplateFlags) apply(e *conveyorv1.CronEntry, payload []byte) []string {
	if e.Options == nil {
		e.Options = &conveyorv1.TaskOptions{}
	}
	o := e.Options
	var paths []string
	set := func(path string, given bool, store func()) {
		if given {
			store()
			paths = append(paths, path)
		}
	}
	set("queue", f.Queue != nil, func() { e.Queue = *f.Queue })
	set("options.priority", f.Priority != nil, func() { o.Priority = *f.Priority })
	set("options.max_retry", f.MaxRetry != nil, func() { o.MaxRetry = *f.MaxRetry })
	set("options.timeout", f.Timeout != nil, func() { o.Timeout = durationOrNil(*f.Timeout) })
	// An explicit 0 retention means purge at once, not the default.
	set("options.retention", f.Retention != nil, func() { o.Retention = durationpb.New(*f.Retention) })
	set("options.unique_key", f.Unique != nil, func() { o.UniqueKey = *f.Unique })
	set("options.unique_ttl", f.UniqueTTL != nil, func() { o.UniqueTtl = durationOrNil(*f.UniqueTTL) })
	// A key cleared takes its TTL with it: a TTL without a key is refused.
	set("options.unique_ttl", f.Unique != nil && *f.Unique == "" && f.UniqueTTL == nil, func() { o.UniqueTtl = nil })
	set("metadata", len(f.Metadata) > 0, func() { e.Metadata = f.Metadata })
	set("content_type", f.ContentType != nil, func() { e.ContentType = *f.ContentType })
	set("payload", payload != nil, func() { e.Payload = payload })
	return paths
}

// durationOrNil is d on the wire; 0 is no value (the option is unset).
func durationOrNil(d time.Duration) *durationpb.Duration {
	if d == 0 {
		return nil
	}
	return durationpb.New(d)
}

// printCron writes one entry: JSON with --json, else a listing.
func (f *clientFlags) printCron(w io.Writer, e *conveyorv1.CronEntry) error {
	if f.JSON {
		return writeJSON(w, e)
	}
	var l listing
	l.add("id", e.GetId())
	l.add("spec", e.GetSpec())
	l.add("queue", e.GetQueue())
	l.add("type", e.GetType())
	l.add("paused", yesNo(e.GetPaused()))
	l.addTime("next_run_at", e.GetNextRunAt())
	l.addTime("last_run_at", e.GetLastRunAt())
	l.addIf("last_task_id", e.GetLastTaskId())
	l.addIf("last_error", e.GetLastError())
	l.addIf("content_type", e.GetContentType())
	l.addBlock("payload", showBytes(e.GetPayload()))
	l.addIf("metadata", showMap(e.GetMetadata()))
	l.addIf("options", showOptions(e.GetOptions()))
	return l.write(w)
}

// showOptions is the options that are set, as "name=value, ...".
func showOptions(o *conveyorv1.TaskOptions) string {
	var parts []string
	add := func(set bool, name string, v any) {
		if set {
			parts = append(parts, fmt.Sprintf("%s=%v", name, v))
		}
	}
	add(o.GetPriority() != 0, "priority", o.GetPriority())
	add(o.GetMaxRetry() != 0, "max_retry", o.GetMaxRetry())
	add(o.GetTimeout() != nil, "timeout", showDuration(o.GetTimeout()))
	add(o.GetRetention() != nil, "retention", showDuration(o.GetRetention()))
	add(o.GetUniqueKey() != "", "unique_key", o.GetUniqueKey())
	add(o.GetUniqueTtl() != nil, "unique_ttl", showDuration(o.GetUniqueTtl()))
	add(o.GetProcessIn() != nil, "process_in", showDuration(o.GetProcessIn()))
	add(o.GetExpiresIn() != nil, "expires_in", showDuration(o.GetExpiresIn()))
	add(o.GetGroup() != "", "group", o.GetGroup())
	add(o.GetConcurrencyKey() != "", "concurrency_key", o.GetConcurrencyKey())
	return strings.Join(parts, ", ")
}

// cronTable writes entries as a table, one row each.
func cronTable(w io.Writer, es []*conveyorv1.CronEntry) error {
	t := newTable(w, "ID", "SPEC", "QUEUE", "TYPE", "PAUSED", "NEXT RUN", "LAST RUN", "LAST TASK")
	for _, e := range es {
		t.row(e.GetId(), e.GetSpec(), orDash(e.GetQueue()), e.GetType(), yesNo(e.GetPaused()),
			showAgo(e.GetNextRunAt()), showAgo(e.GetLastRunAt()), orDash(e.GetLastTaskId()))
	}
	return t.flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
