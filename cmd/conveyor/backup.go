package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
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

// Run downloads the copy into FILE.tmp, fsyncs it, checks that bbolt opens
// it, and renames it to FILE: FILE is never a partial copy.
func (c *backupCmd) Run(k *kong.Context) error {
	if _, err := os.Lstat(c.File); err == nil && !c.Force {
		return fmt.Errorf("%s exists: pass --force to replace it", c.File)
	}
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	start := time.Now()
	tmp := c.File + ".tmp"
	n, err := c.download(ctx, cn, tmp)
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := checkBolt(tmp); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("the backup does not open as a bbolt file: %w", err)
	}
	if err := os.Rename(tmp, c.File); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := syncDir(c.File); err != nil {
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
	_, err = fmt.Fprintf(k.Stdout, "wrote %s: %s in %s\n", c.File, showSize(n), took.Round(time.Millisecond))
	return err
}

// download streams GET /backup into path and fsyncs it.
func (c *backupCmd) download(ctx context.Context, cn *conn, path string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cn.base+server.BackupPath, nil)
	if err != nil {
		return 0, err
	}
	if cn.token != "" {
		req.Header.Set("Authorization", "Bearer "+cn.token)
	}
	res, err := cn.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, withCode(exitUnavailable, "backup: %w", err)
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		return 0, httpError(res)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
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
