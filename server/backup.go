package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"syscall"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// BackupPath is the HTTP path of the online backup.
const BackupPath = "/backup"

// noOnlineBackup answers a backup on an engine that keeps its data
// elsewhere than in a file of its own.
const noOnlineBackup = "this server keeps its tasks in PostgreSQL, which Conveyor does not copy: " +
	"back the database up with its own tools (pg_dump, or base backups and WAL archiving for " +
	"point-in-time recovery); see docs/operations.md"

// backupHandler streams a consistent copy of the store (GET /backup),
// with the bearer token when the server has one. `conveyor backup FILE`
// is its client; docs/operations.md says how to restore.
func (s *Server) backupHandler() http.Handler {
	return s.gate.plain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := s.broker.(broker.Backuper)
		if !ok {
			http.Error(w, noOnlineBackup, http.StatusNotImplemented)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=conveyor-%s.db", s.now().UTC().Format("20060102T150405Z")))
		w.Header().Set("Cache-Control", "no-store")
		if r.Method == http.MethodHead {
			// The mux routes HEAD with GET: answer the headers, without
			// reading the whole store into a body nobody receives.
			w.WriteHeader(http.StatusOK)
			return
		}
		start := s.now()
		n, err := b.Backup(r.Context(), &stallBound{w: w, rc: http.NewResponseController(w), limit: s.cfg.BackupStallTimeout})
		if err != nil {
			// The status line has gone out: cut the body short, so the
			// client sees a broken transfer rather than a good file.
			if clientGone(r, err) {
				s.log.Info("backup canceled by the client", "err", err, "bytes", n)
			} else {
				s.log.Error("backup failed", "err", err, "bytes", n)
			}
			panic(http.ErrAbortHandler)
		}
		s.log.Info("backup written", "bytes", strconv.FormatInt(n, 10), "took", time.Since(start))
	}))
}

// clientGone reports whether a backup ended because its client went away
// (canceled the request, closed the connection): the client's doing, not
// a failure to page anyone about. A client that stays connected but stops
// reading fails by the stall bound, and that is logged as a failure.
func clientGone(r *http.Request, err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false // the stall bound (the failed write also ends the request's context)
	}
	return r.Context().Err() != nil || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET)
}

// stallBound gives each write of a backup limit to complete: a client
// that stops reading fails the backup, which then lets go of its read
// transaction, rather than holding it for as long as the client stays
// connected.
type stallBound struct {
	w     io.Writer
	rc    *http.ResponseController
	limit time.Duration
}

func (s *stallBound) Write(p []byte) (int, error) {
	if err := s.rc.SetWriteDeadline(time.Now().Add(s.limit)); err != nil {
		return 0, fmt.Errorf("bound the backup's writes: %w", err)
	}
	return s.w.Write(p)
}
