package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"
	bbolt "go.etcd.io/bbolt"

	"github.com/conveyor-dev/conveyor/server"
)

// backupCmd is `conveyor backup FILE`: an online, consistent copy of the
// server's data file (one read transaction, GET /backup), written while the
// server goes on serving. docs/cli.md says how to restore it.
type backupCmd struct {
	clientFlags

	File  string `arg:"" type:"path" help:"Where to write the backup (a bbolt file)."`
	Force bool   `help:"Replace FILE if it exists."`
}

// beforeBackupCopy, set by tests, runs once the backup's temporary file
// exists and the server has answered, before the copy: a test stops there
// to interrupt a backup midway.
var beforeBackupCopy func()

// Run downloads the copy into a new temporary file beside FILE, fsyncs it,
// checks that bbolt opens it, and puts it in place as FILE: FILE is never a
// partial copy. Ctrl-C or SIGTERM before then stops the download and
// removes the temporary file.
func (c *backupCmd) Run(k *kong.Context) error {
	if _, err := os.Lstat(c.File); err == nil && !c.Force {
		return fmt.Errorf("%s exists: pass --force to replace it", c.File)
	}
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	tmp, n, err := c.copyInto(ctx, cn)
	if err == nil && ctx.Err() != nil { // the signal came as the copy ended
		_ = os.Remove(tmp)
		err = ctx.Err()
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("backup interrupted: its partial copy is removed, and %s is untouched", c.File)
		}
		return err
	}
	// From here on a signal is ignored: putting the file in place is quick.
	if err := c.place(tmp); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	took := time.Since(start)
	if c.JSON {
		return writeJSONValue(k.Stdout, struct {
			File    string  `json:"file"`
			Bytes   int64   `json:"bytes"`
			Seconds float64 `json:"seconds"`
		}{c.File, n, took.Seconds()})
	}
	return writef(k.Stdout, "wrote %s: %s in %s\n", c.File, showSize(n), took.Round(time.Millisecond).String())
}

// copyInto downloads the backup into a temporary file of its own in FILE's
// directory, fsyncs and checks it, and returns its path; on any failure it
// removes the file. os.CreateTemp picks a random name and creates it with
// O_EXCL and mode 0600: a file or symlink planted at a predictable name is
// never opened, and two backups at once never write into one file.
func (c *backupCmd) copyInto(ctx context.Context, cn *conn) (string, int64, error) {
	f, err := os.CreateTemp(filepath.Dir(c.File), filepath.Base(c.File)+".tmp-*")
	if err != nil {
		return "", 0, fmt.Errorf("backup: %w", err)
	}
	tmp := f.Name()
	n, err := c.download(ctx, cn, f)
	if err == nil {
		if err = checkBolt(tmp); err != nil {
			err = fmt.Errorf("the backup does not open as a bbolt file: %w", err)
		}
	}
	if err != nil {
		_ = os.Remove(tmp)
		return "", n, err
	}
	return tmp, n, nil
}

// place puts the checked copy tmp in place as FILE, durably. Without
// --force it links rather than renames, so that a FILE that appeared
// since the check (another backup's) is never replaced; a file system
// without hard links gets the rename.
func (c *backupCmd) place(tmp string) error {
	if !c.Force {
		err := os.Link(tmp, c.File)
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%s exists: pass --force to replace it", c.File)
		}
		if err == nil {
			_ = os.Remove(tmp) // FILE is in place; the extra name goes
			return syncDir(c.File)
		}
	}
	if err := os.Rename(tmp, c.File); err != nil {
		return err
	}
	return syncDir(c.File)
}

// download streams GET /backup into f, fsyncs it and closes it.
func (c *backupCmd) download(ctx context.Context, cn *conn, f *os.File) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cn.base+server.BackupPath, nil)
	if err != nil {
		_ = f.Close()
		return 0, err
	}
	if cn.token != "" {
		req.Header.Set("Authorization", "Bearer "+cn.token)
	}
	res, err := cn.http.Do(req)
	if err != nil {
		_ = f.Close()
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, withCode(exitUnavailable, "backup: %w", err)
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		_ = f.Close()
		return 0, httpError(res)
	}
	if beforeBackupCopy != nil {
		beforeBackupCopy()
	}
	// The server cuts the body short when its copy fails, so a transfer
	// that ends without error is the whole file.
	n, err := io.Copy(f, res.Body)
	if err != nil {
		_ = f.Close()
		return n, fmt.Errorf("backup cut short after %d bytes: %w", n, err)
	}
	return n, syncFile(f)
}

// httpError is a failed GET as an error with the exit code of the matching
// connect code, and the server's message.
func httpError(res *http.Response) error {
	msg, _ := io.ReadAll(io.LimitReader(res.Body, 1024))
	code := exitFailure
	switch res.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		code = exitAuth
	case http.StatusNotFound:
		code = exitNotFound
	case http.StatusNotImplemented:
		code = exitRefused
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		code = exitUnavailable
	}
	return &codeError{code: code, err: fmt.Errorf("backup: %s: %s", res.Status, strings.TrimSpace(string(msg)))}
}

// checkBolt opens path read-only, which checks bbolt's meta pages.
func checkBolt(path string) error {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		return err
	}
	return db.Close()
}
