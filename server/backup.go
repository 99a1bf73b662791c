package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// BackupPath is the HTTP path of the online backup.
const BackupPath = "/backup"

// backupHandler streams a consistent copy of the store (GET /backup),
// with the bearer token when the server has one. `conveyor backup FILE`
// is its client; docs/operations.md says how to restore.
func (s *Server) backupHandler() http.Handler {
	return s.gate.plain(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, ok := s.broker.(broker.Backuper)
		if !ok {
			http.Error(w, "this storage engine cannot be backed up online", http.StatusNotImplemented)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=conveyor-%s.db", s.now().UTC().Format("20060102T150405Z")))
		w.Header().Set("Cache-Control", "no-store")
		start := s.now()
		n, err := b.Backup(r.Context(), w)
		if err != nil {
			// The status line has gone out: cut the body short, so the
			// client sees a broken transfer rather than a good file.
			s.log.Error("backup failed", "err", err, "bytes", n)
			panic(http.ErrAbortHandler)
		}
		s.log.Info("backup written", "bytes", strconv.FormatInt(n, 10), "took", time.Since(start))
	}))
}
