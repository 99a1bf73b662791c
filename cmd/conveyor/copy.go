package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	"github.com/conveyor-dev/conveyor/broker/postgres"
	"github.com/conveyor-dev/conveyor/server"
)

// copyCmd is `conveyor copy --from SRC --to DST`: moves every task (in any
// state, with its history), queue and cron entry of a stopped deployment's
// store into an empty store of either engine.
type copyCmd struct {
	From string `required:"" placeholder:"SRC" help:"The store to copy: a data directory (its conveyor.db) or a postgres:// URL."`
	To   string `required:"" placeholder:"DST" help:"The empty store to fill: a data directory (created if missing) or a postgres:// URL."`
}

// copyProgressEvery is how often, at most, the copy reports its progress
// where standard error is not a terminal (one line each time).
const copyProgressEvery = 5 * time.Second

// Run opens both stores (refusing a store a server has open, and a
// destination that is not empty), copies, checks the copy against its
// source and commits it. Ctrl-C or SIGTERM before the commit leaves the
// destination as it was.
func (c *copyCmd) Run(k *kong.Context) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	from, to := storeOf(c.From), storeOf(c.To)
	if from.same(to) {
		return usageErrorf("--from and --to name the same store (%s): a copy goes from one store into another", from)
	}
	src, err := from.openSource(ctx)
	if err != nil {
		return fmt.Errorf("copy from %s: %w", from, err)
	}
	defer func() { _ = src.Close() }()
	dst, err := to.openTarget(ctx)
	if err != nil {
		return fmt.Errorf("copy to %s: %w", to, err)
	}
	defer func() { _ = dst.Close() }()

	bar := &progressBar{w: k.Stderr, tty: isTerminal(k.Stderr), label: "copy"}
	var shown time.Time
	every := copyProgressEvery
	if bar.tty {
		every = 100 * time.Millisecond
	}
	st, err := runCopy(ctx, src, dst, func(done, total int64) {
		if now := time.Now(); now.Sub(shown) >= every || done == total {
			shown = now
			bar.show(done, total, 0)
		}
	})
	bar.end()
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("copy interrupted: nothing was copied into %s", to)
		}
		return fmt.Errorf("copy from %s to %s: %w; nothing was copied into %s", from, to, err, to)
	}
	return copySummary(k.Stdout, from, to, st)
}

// store is a store named on the command line: a data directory, or a
// PostgreSQL URL.
type store struct {
	dir, url string
}

func storeOf(arg string) store {
	if strings.HasPrefix(arg, "postgres://") || strings.HasPrefix(arg, "postgresql://") {
		return store{url: arg}
	}
	return store{dir: arg}
}

// String names the store for people (a URL without its password).
func (s store) String() string {
	if s.url != "" {
		return postgres.RedactURL(s.url)
	}
	return s.dir
}

// engine names the store's engine.
func (s store) engine() string {
	if s.url != "" {
		return "postgres"
	}
	return bolt.EngineName
}

// same reports whether s and o name one store.
func (s store) same(o store) bool {
	switch {
	case s.url != "" && o.url != "":
		return postgres.SameDatabase(s.url, o.url)
	case s.url != "" || o.url != "":
		return false
	}
	a, errA := os.Stat(s.dir)
	b, errB := os.Stat(o.dir)
	if errA == nil && errB == nil {
		return os.SameFile(a, b)
	}
	absA, _ := filepath.Abs(s.dir)
	absB, _ := filepath.Abs(o.dir)
	return absA == absB
}

func (s store) openSource(ctx context.Context) (broker.CopySource, error) {
	if s.url != "" {
		return postgres.OpenCopySource(ctx, s.url, "")
	}
	path := filepath.Join(s.dir, server.DataFile)
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%s holds no data file (%s)", s.dir, server.DataFile)
	}
	return bolt.OpenCopySource(path)
}

func (s store) openTarget(ctx context.Context) (broker.CopyTarget, error) {
	if s.url != "" {
		return postgres.OpenCopyTarget(ctx, s.url, "")
	}
	return bolt.OpenCopyTarget(filepath.Join(s.dir, server.DataFile))
}

// copySummary says what a copy moved: its tasks per state, its queues and
// cron entries, and that the destination was checked against the source.
func copySummary(w io.Writer, from, to store, st copyStats) error {
	rate := ""
	if secs := st.Took.Seconds(); secs > 0 && st.Tasks > 0 {
		rate = fmt.Sprintf(" (%.0f tasks/s)", float64(st.Tasks)/secs)
	}
	if err := writef(w, "copied %d %s, %d %s and %d %s from %s (%s) to %s (%s) in %s%s\n\n",
		st.Tasks, plural(st.Tasks, "task", "tasks"), len(st.Queues), plural(int64(len(st.Queues)), "queue", "queues"),
		st.Crons, plural(int64(st.Crons), "cron entry", "cron entries"),
		from.String(), from.engine(), to.String(), to.engine(), st.Took.Round(time.Millisecond).String(), rate); err != nil {
		return err
	}
	if len(st.Queues) > 0 {
		tb := newTable(w, "QUEUE", "PAUSED", "TASKS", "BY STATE")
		for _, q := range st.Queues {
			var n int64
			for _, c := range q.Counts {
				n += c
			}
			paused := "no"
			if q.Paused {
				paused = "yes"
			}
			tb.row(q.Name, paused, fmt.Sprint(n), showCounts(q.Counts))
		}
		if err := tb.flush(); err != nil {
			return err
		}
		if err := writef(w, "\n"); err != nil {
			return err
		}
	}
	tb := newTable(w, "STATE", "TASKS")
	for s := broker.StateScheduled; s < broker.NumStates; s++ {
		tb.row(s.String(), fmt.Sprint(st.Counts[s]))
	}
	tb.row("total", fmt.Sprint(st.Tasks))
	if err := tb.flush(); err != nil {
		return err
	}
	if err := writef(w, "\nqueue history: %d %s\n", st.History, plural(int64(st.History), "sample", "samples")); err != nil {
		return err
	}
	if err := writef(w, "\nverified: the destination holds every task the source counts, and each queue's tasks per state, "+
		"pause flag, configuration and totals, each cron entry, and the queues' history, are the source's\n"); err != nil {
		return err
	}
	if n := st.Counts[broker.StateActive]; n > 0 {
		return writef(w, "%d %s ACTIVE when the source's server stopped: the server that opens %s makes %s PENDING again, "+
			"with no retry counted (CANCELED instead, for a task an operator canceled while it ran)\n",
			n, plural(n, "task was", "tasks were"), to.String(), plural(n, "it", "them"))
	}
	return nil
}

// plural is one or many, for n.
func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
