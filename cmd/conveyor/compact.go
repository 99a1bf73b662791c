package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/conveyor-dev/conveyor/broker/bolt"
	"github.com/conveyor-dev/conveyor/server"
)

// compactCmd is `conveyor compact --data-dir DIR`: rewrites a stopped
// server's data file without its free pages, to give disk space back.
type compactCmd struct {
	DataDir  string `name:"data-dir" default:"${data_dir}" env:"CONVEYOR_DATA_DIR" type:"path" help:"Directory of the data file (the server's --data-dir)."`
	NoBackup bool   `name:"no-backup" help:"Do not keep the old file as conveyor.db.bak."`
	JSON     bool   `name:"json" help:"Print the result as JSON."`
}

const (
	// compactTxSize is how many bytes of keys and values one transaction
	// of the copy holds before it commits: it bounds compact's memory.
	compactTxSize = 16 << 20
	// lockTimeout is how long compact waits for the file's lock. A server
	// holds the lock as long as it runs, so waiting longer does not help.
	lockTimeout = time.Second
)

// Run copies every bucket into a new file beside the old one (bbolt's
// Compact), fsyncs it, checks it, and renames it over conveyor.db. The old
// file stays open, and so locked, until the new one is in place, so that a
// server cannot start on it meanwhile. Ctrl-C or SIGTERM before the rename
// stops the copy and removes it: the store changes only by the rename.
func (c *compactCmd) Run(k *kong.Context) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	path := filepath.Join(c.DataDir, server.DataFile)
	bak := path + ".bak"
	unlock, err := lockDir(c.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	if dirLocked {
		if err := removeStaleCopies(k.Stderr, c.DataDir); err != nil {
			return err
		}
	}
	before, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	if _, err := os.Lstat(bak); err == nil && !c.NoBackup {
		return fmt.Errorf("%s exists from an earlier compact: remove it, or pass --no-backup", bak)
	}
	src, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: lockTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return fmt.Errorf("%s is in use, by a running server most likely: stop it first (conveyor backup copies a running server's file)", path)
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	defer func() { _ = src.Close() }()
	if err := checkLength(src, before.Size()); err != nil {
		return err
	}

	start := time.Now()
	tmp, err := compactInto(ctx, src, c.DataDir)
	if err == nil && ctx.Err() != nil { // the signal came as the copy ended
		_ = os.Remove(tmp)
		err = errInterrupted
	}
	if errors.Is(err, errInterrupted) {
		return fmt.Errorf("compact interrupted: its partial copy is removed, and %s is untouched", path)
	}
	if err != nil {
		return err
	}
	// From here on a signal is ignored: the rename is quick, and stopping
	// halfway through the swap would leave a .bak for no compact.
	if err := copyOwner(before, tmp); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	after, err := os.Stat(tmp)
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := c.swap(path, tmp, bak); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	took := time.Since(start)
	if c.NoBackup {
		bak = ""
	}
	if c.JSON {
		return writeJSONValue(k.Stdout, struct {
			File        string  `json:"file"`
			BytesBefore int64   `json:"bytesBefore"`
			BytesAfter  int64   `json:"bytesAfter"`
			Backup      string  `json:"backup"`
			Seconds     float64 `json:"seconds"`
		}{path, before.Size(), after.Size(), bak, took.Seconds()})
	}
	msg := fmt.Sprintf("compacted %s: %s → %s in %s", path, showSize(before.Size()), showSize(after.Size()), took.Round(time.Millisecond))
	if bak != "" {
		msg += "; the old file is " + bak
	}
	_, err = fmt.Fprintln(k.Stdout, msg)
	return err
}

// errInterrupted is compactInto's error when ctx ended before the copy did.
var errInterrupted = errors.New("interrupted")

// beforeCopy, set by tests, runs once the copy's file exists, before the
// copy starts: a test stops there to interrupt a compact midway.
var beforeCopy func()

// compactInto copies src into a new file in dir, fsyncs and checks it, and
// returns its path. When ctx ends first it removes the file and returns
// errInterrupted.
func compactInto(ctx context.Context, src *bbolt.DB, dir string) (string, error) {
	f, err := os.CreateTemp(dir, server.DataFile+".compact-*")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	_ = f.Close()
	fail := func(err error) (string, error) {
		_ = os.Remove(tmp)
		return "", err
	}
	// NoSync: the copy commits many times, and only the whole file
	// matters; one fsync at the end makes it durable. The freelist type
	// is the server's (broker/bolt), so the file opens as it expects.
	dst, err := bbolt.Open(tmp, 0o600, &bbolt.Options{NoSync: true, FreelistType: bbolt.FreelistMapType})
	if err != nil {
		return fail(err)
	}
	copied := make(chan error, 1)
	go func() { copied <- copyChecked(src, dst) }()
	select {
	case err = <-copied:
	case <-ctx.Done():
		// bbolt.Compact takes no context. Closing dst waits for the
		// copy's open transaction and fails its next one, so the copy
		// stops within compactTxSize bytes.
		_ = dst.Close()
		err = errors.Join(errInterrupted, <-copied)
	}
	if err != nil {
		_ = dst.Close()
		return fail(err)
	}
	if err := dst.Sync(); err != nil {
		_ = dst.Close()
		return fail(fmt.Errorf("fsync %s: %w", tmp, err))
	}
	if err := dst.Close(); err != nil {
		return fail(err)
	}
	return tmp, nil
}

// copyChecked copies src into dst and runs bbolt's check on the copy.
func copyChecked(src, dst *bbolt.DB) error {
	if beforeCopy != nil {
		beforeCopy()
	}
	copyAll := func() error { return bbolt.Compact(dst, src, compactTxSize) }
	if err := bolt.ReadGuarded(src.Path(), copyAll); err != nil {
		return fmt.Errorf("compact: %w", err)
	}
	return dst.View(func(tx *bbolt.Tx) error {
		// Every error is read: the checker goroutine blocks on the
		// channel, and would read the file after Close unmapped it.
		var first error
		for err := range tx.Check() {
			first = cmp.Or(first, err)
		}
		if first != nil {
			return fmt.Errorf("the compacted file fails bbolt's check: %w", first)
		}
		return nil
	})
}

// removeStaleCopies removes the copies that compacts killed midway (by
// SIGKILL, a crash, a power cut) left in dir, and says so on w. Only a
// compact writes such a file, and only while it holds dir's lock, so with
// the lock held every one is stale.
func removeStaleCopies(w io.Writer, dir string) error {
	stale, err := filepath.Glob(filepath.Join(dir, server.DataFile+".compact-*"))
	if err != nil {
		return err
	}
	for _, f := range stale {
		if err := os.Remove(f); err != nil {
			return fmt.Errorf("remove the copy an interrupted compact left: %w", err)
		}
		_, _ = fmt.Fprintf(w, "removed %s, left by a compact that did not finish\n", f)
	}
	return nil
}

// swap puts tmp in place of path, keeping the old file as bak unless
// --no-backup. A hard link keeps the old file without a moment when path
// does not exist; where links are not supported, a rename does it.
func (c *compactCmd) swap(path, tmp, bak string) error {
	if !c.NoBackup {
		if err := os.Link(path, bak); err != nil {
			if err := os.Rename(path, bak); err != nil {
				return fmt.Errorf("keep the old file as %s: %w", bak, err)
			}
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(path)
}
