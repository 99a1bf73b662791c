package handlers

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// TestOnceAppends pins conformance.once: each run appends one line, its
// task's id, to the file, which is created if need be; with no file
// configured it fails, not to be retried.
func TestOnceAppends(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "once.log")
	h := onceLogger(path)
	for _, id := range []string{"01A", "01B", "01A"} {
		if err := h(context.Background(), &conveyor.Delivery{ID: id, Type: TypeOnce}); err != nil {
			t.Fatalf("run %s: %v", id, err)
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), "01A\n01B\n01A\n"; got != want {
		t.Fatalf("the log holds %q, want %q", got, want)
	}
	err = onceLogger("")(context.Background(), &conveyor.Delivery{ID: "01C"})
	if !errors.Is(err, conveyor.ErrSkipRetry) {
		t.Fatalf("with no log: %v, want a SkipRetry error", err)
	}
	err = onceLogger(filepath.Join(t.TempDir(), "no", "such", "dir"))(context.Background(), &conveyor.Delivery{ID: "01D"})
	if err == nil || errors.Is(err, conveyor.ErrSkipRetry) {
		t.Fatalf("with a log it cannot open: %v, want a retryable error", err)
	}
}
