// Package handlers holds the conformance task types' handlers, shared by
// the conformance worker (a session) and the conformance push worker (an
// HTTP push endpoint), so that both modes run the same code.
package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// The task types of the conformance workers (CONTRACT.md).
const (
	TypeEcho     = "conformance.echo"
	TypeFail     = "conformance.fail"
	TypeSkip     = "conformance.skip"
	TypePanic    = "conformance.panic"
	TypeSleep    = "conformance.sleep"
	TypeProgress = "conformance.progress"
	TypeBatch    = "conformance.batch"
	TypeOnce     = "conformance.once"
)

// EnvOnceLog names the file conformance.once appends to.
const EnvOnceLog = "CONVEYOR_ONCE_LOG"

// Config configures the handlers.
type Config struct {
	// BatchTypes are the types served by a batch handler whose members
	// each succeed with their own payload.
	BatchTypes []string
	// OnceLog is the file conformance.once appends each task's id to, a
	// line each (CONVEYOR_ONCE_LOG). Empty: conformance.once fails, do not
	// retry.
	OnceLog string
}

// Register installs the handlers on w: each type in cfg.BatchTypes as a
// batch handler whose members each succeed with their own payload, every
// other conformance type as its plain handler (conformance.batch, when not
// a batch type, echoes).
func Register(w *conveyor.Worker, cfg Config) {
	plain := map[string]conveyor.HandlerFunc{
		TypeEcho:     echo,
		TypeFail:     fail,
		TypeSkip:     skip,
		TypePanic:    panicking,
		TypeSleep:    sleep,
		TypeProgress: progress,
		TypeBatch:    echo,
		TypeOnce:     onceLogger(cfg.OnceLog),
	}
	batchTypes := cfg.BatchTypes
	for _, t := range batchTypes {
		w.HandleBatch(t, conveyor.BatchHandlerFunc(echoBatch))
	}
	for t, h := range plain {
		if !slices.Contains(batchTypes, t) {
			w.Handle(t, h)
		}
	}
}

// echo succeeds with the payload's bytes as the result, unchanged.
func echo(_ context.Context, d *conveyor.Delivery) error {
	d.SetResult(d.Payload)
	return nil
}

// echoBatch succeeds for every member, each with its own payload.
func echoBatch(_ context.Context, b *conveyor.DeliveryBatch) error {
	for _, d := range b.Tasks {
		d.SetResult(d.Payload)
	}
	return nil
}

// fail fails with a retryable error whose message is the payload's
// "message".
func fail(_ context.Context, d *conveyor.Delivery) error {
	var p struct{ Message string }
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		return fmt.Errorf("decode payload: %w", err)
	}
	return errors.New(p.Message)
}

// skip fails with the SDK's do-not-retry error, its message the payload's
// "message".
func skip(_ context.Context, d *conveyor.Delivery) error {
	var p struct{ Message string }
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		return conveyor.SkipRetry(fmt.Errorf("decode payload: %w", err))
	}
	return conveyor.SkipRetry(errors.New(p.Message))
}

// panicking panics; the SDK must recover it as a retryable failure.
func panicking(context.Context, *conveyor.Delivery) error {
	panic("conformance.panic: panicking on purpose")
}

// sleep waits the payload's "ms" or until its context ends (deadline,
// Cancel, drain), and then fails with the context's error.
func sleep(ctx context.Context, d *conveyor.Delivery) error {
	var p struct{ Ms int64 }
	if err := json.Unmarshal(d.Payload, &p); err != nil {
		return conveyor.SkipRetry(fmt.Errorf("decode payload: %w", err))
	}
	t := time.NewTimer(time.Duration(p.Ms) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// progress reports 50% with message "half", then succeeds. Over push,
// which has no channel for progress, it only succeeds.
func progress(_ context.Context, d *conveyor.Delivery) error {
	d.Progress(50, "half")
	return nil
}

// onceLogger returns conformance.once's handler: it appends one line, the
// task's id, to the file at path, and succeeds once the line is on disk. A
// test that enqueues at-most-once tasks counts each id's lines to tell
// how many times each ran, whatever became of the worker after.
func onceLogger(path string) conveyor.HandlerFunc {
	return func(_ context.Context, d *conveyor.Delivery) error {
		if path == "" {
			return conveyor.SkipRetry(errors.New(EnvOnceLog + " is not set: conformance.once has no file to append to"))
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("open %s: %w", EnvOnceLog, err)
		}
		// One write of one whole line: O_APPEND makes it land at the end
		// whole, beside other workers appending to the same file.
		_, err = f.Write([]byte(d.ID + "\n"))
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("append to %s: %w", EnvOnceLog, err)
		}
		return nil
	}
}
