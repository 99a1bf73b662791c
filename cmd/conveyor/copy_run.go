package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// A batch of tasks the destination loads at once: at most copyBatchTasks
// tasks, and no more once copyBatchBytes of their payloads and results
// are in (a batch is held in memory).
const (
	copyBatchTasks = 2000
	copyBatchBytes = 16 << 20
)

// copyStats is what a copy moved.
type copyStats struct {
	// Queues are the source's, with its counts.
	Queues []broker.QueueInfo
	Crons  int
	// History is how many samples of the queues' history it moved.
	History int
	Tasks   int64
	Counts  broker.Counts
	Took    time.Duration
}

// runCopy moves every queue, task and cron entry of src, and the queues'
// history, into dst, and commits dst only once it holds what src holds
// (verifyCopy). The source is read on a goroutine of its own while the
// destination loads the batch before. progress is told how many tasks
// are loaded, of how many.
func runCopy(ctx context.Context, src broker.CopySource, dst broker.CopyTarget, progress func(done, total int64)) (copyStats, error) {
	start := time.Now()
	var st copyStats
	queues, err := src.CopyQueues(ctx)
	if err != nil {
		return st, fmt.Errorf("read the source's queues: %w", err)
	}
	crons, err := src.CopyCrons(ctx)
	if err != nil {
		return st, fmt.Errorf("read the source's cron entries: %w", err)
	}
	st.Queues, st.Crons = queues, len(crons)
	var total int64
	for _, q := range queues {
		for _, n := range q.Counts {
			total += n
		}
	}
	if err := dst.LoadQueues(ctx, queues); err != nil {
		return st, err
	}
	read, err := loadTasks(ctx, src, dst, total, progress, &st)
	if err != nil {
		return st, err
	}
	if err := dst.LoadCrons(ctx, crons); err != nil {
		return st, err
	}
	history, err := src.CopyHistory(ctx)
	if err != nil {
		return st, fmt.Errorf("read the source's queue history: %w", err)
	}
	st.History = len(history.Samples)
	if err := dst.LoadHistory(ctx, history); err != nil {
		return st, err
	}
	if err := dst.Seal(ctx); err != nil {
		return st, err
	}
	if err := verifyCopy(ctx, queues, read, crons, history, dst); err != nil {
		return st, err
	}
	if err := ctx.Err(); err != nil { // interrupted: nothing is committed
		return st, err
	}
	if err := dst.Commit(ctx); err != nil {
		return st, err
	}
	st.Took = time.Since(start)
	return st, nil
}

// loadTasks streams src's tasks into dst in batches, and counts what it
// read per queue and state.
func loadTasks(ctx context.Context, src broker.CopySource, dst broker.CopyTarget, total int64,
	progress func(done, total int64), st *copyStats) (map[string]broker.Counts, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan []*broker.CopyTask, 2)
	readErr := make(chan error, 1)
	go func() {
		defer close(batches)
		var batch []*broker.CopyTask
		size := 0
		send := func() error {
			select {
			case batches <- batch:
				batch, size = nil, 0
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		err := src.CopyTasks(ctx, func(t *broker.CopyTask) error {
			batch = append(batch, t)
			size += len(t.Payload) + len(t.Result)
			if len(batch) < copyBatchTasks && size < copyBatchBytes {
				return nil
			}
			return send()
		})
		if err == nil && len(batch) > 0 {
			err = send()
		}
		readErr <- err
	}()
	read := map[string]broker.Counts{}
	var loadErr error
	for batch := range batches {
		if loadErr != nil {
			continue // drain: the reader stops at the canceled context
		}
		for _, t := range batch {
			c := read[t.Queue]
			c[t.State]++
			read[t.Queue] = c
			st.Counts[t.State]++
		}
		if loadErr = dst.LoadTasks(ctx, batch); loadErr != nil {
			cancel()
			continue
		}
		st.Tasks += int64(len(batch))
		progress(st.Tasks, total)
	}
	if err := <-readErr; loadErr == nil && err != nil {
		return nil, fmt.Errorf("read the source's tasks: %w", err)
	}
	if loadErr != nil {
		return nil, fmt.Errorf("load tasks: %w", loadErr)
	}
	return read, nil
}

// verifyCopy checks, before the copy is committed, that it read every
// task the source counts, and that the destination holds what the source
// holds: per queue its tasks per state, its pause flag, configuration and
// totals, every cron entry with its run history, and the queues' history.
func verifyCopy(ctx context.Context, queues []broker.QueueInfo, read map[string]broker.Counts, crons []broker.CronEntry,
	history broker.HistoryCopy, dst broker.CopyTarget) error {
	var bad []string
	seen := map[string]bool{}
	for _, q := range queues {
		seen[q.Name] = true
		if read[q.Name] != q.Counts {
			bad = append(bad, fmt.Sprintf("queue %q: the source counts %s, the copy read %s", q.Name, showCounts(q.Counts), showCounts(read[q.Name])))
		}
	}
	for name, c := range read {
		if !seen[name] {
			bad = append(bad, fmt.Sprintf("queue %q: the source lists no such queue, the copy read %s", name, showCounts(c)))
		}
	}
	got, err := dst.CopyQueues(ctx)
	if err != nil {
		return fmt.Errorf("read back the destination's queues: %w", err)
	}
	bad = append(bad, diffQueues(queues, got)...)
	gotCrons, err := dst.CopyCrons(ctx)
	if err != nil {
		return fmt.Errorf("read back the destination's cron entries: %w", err)
	}
	bad = append(bad, diffCrons(crons, gotCrons)...)
	gotHistory, err := dst.CopyHistory(ctx)
	if err != nil {
		return fmt.Errorf("read back the destination's queue history: %w", err)
	}
	bad = append(bad, diffHistory(history, gotHistory)...)
	if len(bad) == 0 {
		return nil
	}
	const shown = 20
	more := ""
	if len(bad) > shown {
		bad, more = bad[:shown], fmt.Sprintf("\n  (and %d more)", len(bad)-shown)
	}
	return fmt.Errorf("the copy does not match its source, so it was not committed:\n  %s%s", strings.Join(bad, "\n  "), more)
}

// diffQueues says how the destination's queues (got) differ from the
// source's (want); both are sorted by name.
func diffQueues(want, got []broker.QueueInfo) []string {
	var bad []string
	byName := map[string]broker.QueueInfo{}
	for _, q := range got {
		byName[q.Name] = q
	}
	for _, w := range want {
		g, ok := byName[w.Name]
		delete(byName, w.Name)
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("queue %q: missing from the destination", w.Name))
			continue
		case g.Counts != w.Counts:
			bad = append(bad, fmt.Sprintf("queue %q: the destination holds %s, the source %s", w.Name, showCounts(g.Counts), showCounts(w.Counts)))
		}
		if g.Paused != w.Paused || g.Config != w.Config {
			bad = append(bad, fmt.Sprintf("queue %q: paused %v and configuration %+v in the destination, %v and %+v in the source",
				w.Name, g.Paused, g.Config, w.Paused, w.Config))
		}
		if g.Enqueued != w.Enqueued || g.Processed != w.Processed || g.Failed != w.Failed || g.Expired != w.Expired {
			bad = append(bad, fmt.Sprintf("queue %q: totals (enqueued, processed, failed, expired) %d, %d, %d, %d in the destination, %d, %d, %d, %d in the source",
				w.Name, g.Enqueued, g.Processed, g.Failed, g.Expired, w.Enqueued, w.Processed, w.Failed, w.Expired))
		}
	}
	for name := range byName {
		bad = append(bad, fmt.Sprintf("queue %q: in the destination, not in the source", name))
	}
	return bad
}

// diffCrons says how the destination's cron entries differ from the
// source's; both are sorted by id.
func diffCrons(want, got []broker.CronEntry) []string {
	var bad []string
	byID := map[string]broker.CronEntry{}
	for _, c := range got {
		byID[c.ID] = c
	}
	for _, w := range want {
		g, ok := byID[w.ID]
		delete(byID, w.ID)
		if !ok {
			bad = append(bad, fmt.Sprintf("cron entry %q: missing from the destination", w.ID))
		} else if !sameCron(g, w) {
			bad = append(bad, fmt.Sprintf("cron entry %q: %+v in the destination, %+v in the source", w.ID, g, w))
		}
	}
	for id := range byID {
		bad = append(bad, fmt.Sprintf("cron entry %q: in the destination, not in the source", id))
	}
	return bad
}

// diffHistory says how the destination's queue history differs from the
// source's.
func diffHistory(want, got broker.HistoryCopy) []string {
	var bad []string
	if !want.Round.Equal(got.Round) {
		bad = append(bad, fmt.Sprintf("history round: %s in the destination, %s in the source", got.Round, want.Round))
	}
	type at struct {
		res    broker.HistoryResolution
		queue  string
		bucket int64
	}
	keyOf := func(r broker.ResolutionSample) at { return at{r.Resolution, r.Queue, r.Bucket.UnixNano()} }
	byKey := map[at]broker.HistoryCounters{}
	for _, r := range got.Samples {
		byKey[keyOf(r)] = r.HistoryCounters
	}
	for _, w := range want.Samples {
		k := keyOf(w)
		g, ok := byKey[k]
		delete(byKey, k)
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("history of queue %q at %s (resolution %d): missing from the destination", w.Queue, w.Bucket, w.Resolution))
		case g != w.HistoryCounters:
			bad = append(bad, fmt.Sprintf("history of queue %q at %s (resolution %d): %+v in the destination, %+v in the source",
				w.Queue, w.Bucket, w.Resolution, g, w.HistoryCounters))
		}
	}
	for k := range byKey {
		bad = append(bad, fmt.Sprintf("history of queue %q at %s (resolution %d): in the destination, not in the source",
			k.queue, time.Unix(0, k.bucket).UTC(), k.res))
	}
	return bad
}

// sameCron reports whether two views of a cron entry are equal (empty
// and missing bytes and metadata alike).
func sameCron(a, b broker.CronEntry) bool {
	return a.ID == b.ID && a.Spec == b.Spec && a.Queue == b.Queue && a.Type == b.Type &&
		bytes.Equal(a.Payload, b.Payload) && a.ContentType == b.ContentType && maps.Equal(a.Metadata, b.Metadata) &&
		bytes.Equal(a.Options, b.Options) && a.Paused == b.Paused && a.NextRun.Equal(b.NextRun) &&
		a.LastRun.Equal(b.LastRun) && a.LastFire.Equal(b.LastFire) && a.LastTaskID == b.LastTaskID && a.LastError == b.LastError
}

// showCounts is the states c counts, as "3 pending, 1 active" ("none").
func showCounts(c broker.Counts) string {
	var parts []string
	for s, n := range c {
		if n != 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, broker.State(s)))
		}
	}
	if len(parts) == 0 {
		return "no tasks"
	}
	return strings.Join(parts, ", ")
}
