//go:build unix

package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestBackupIgnoresPlantedTemp: a symlink or a world-readable file left at
// the name the backup once wrote through (FILE.tmp) is not opened: the
// link's target keeps its bytes, the leftover stays as it was, and FILE is
// a new regular file of mode 0600 that bbolt opens.
func TestBackupIgnoresPlantedTemp(t *testing.T) {
	t.Parallel()
	s := servertest.StartBolt(t, server.Config{})
	addr := "--addr=" + s.URL()
	enqueueID(t, addr, "--content-type", "text/plain", "--queue", "q", "t", "kept")

	for _, planted := range []string{"symlink", "file 0644"} {
		t.Run(planted, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, "backup.db")
			target := filepath.Join(dir, "precious")
			if err := os.WriteFile(target, []byte("precious"), 0o644); err != nil {
				t.Fatal(err)
			}
			var err error
			if planted == "symlink" {
				err = os.Symlink(target, file+".tmp")
			} else {
				err = os.WriteFile(file+".tmp", []byte("leftover"), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
			mustRun(t, "backup", addr, file)
			if b, err := os.ReadFile(target); err != nil || string(b) != "precious" {
				t.Errorf("the backup wrote through the planted %s: its target holds %d bytes (%v)", planted, len(b), err)
			}
			fi, err := os.Lstat(file)
			if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
				t.Fatalf("the backup file: %v (%v), want a regular file of mode 0600", fi.Mode(), err)
			}
			if err := checkBolt(file); err != nil {
				t.Errorf("the backup does not open: %v", err)
			}
			if fi, err := os.Lstat(file + ".tmp"); err != nil || (planted == "symlink") != (fi.Mode()&os.ModeSymlink != 0) {
				t.Errorf("the planted %s was changed or removed: %v", planted, err)
			}
			if left := tempFiles(t, file); len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

// TestBackupsAtOnce: two backups to one FILE whose transfers overlap (each
// is held halfway until the other is halfway too) both succeed with
// --force; without it one may fail, saying FILE exists. Either way FILE is
// a whole bbolt file and no temporary file is left.
func TestBackupsAtOnce(t *testing.T) {
	t.Parallel()
	s := servertest.StartBolt(t, server.Config{})
	enqueueID(t, "--addr="+s.URL(), "--content-type", "text/plain", "--queue", "q", "t", strings.Repeat("x", 64<<10))
	for _, force := range []bool{true, false} {
		name := "without --force"
		if force {
			name = "with --force"
		}
		t.Run(name, func(t *testing.T) {
			addr := "--addr=" + overlappingBackups(t, s)
			file := filepath.Join(t.TempDir(), "backup.db")
			args := []string{"backup", addr, file}
			if force {
				args = append(args, "--force")
			}
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i := range errs {
				wg.Go(func() { _, errs[i] = runCLI(t, "", args...) })
			}
			wg.Wait()
			ok := 0
			for _, err := range errs {
				switch {
				case err == nil:
					ok++
				case force || !strings.Contains(err.Error(), "exists"):
					t.Errorf("a backup failed: %v", err)
				}
			}
			if ok == 0 {
				t.Error("neither backup succeeded")
			}
			if err := checkBolt(file); err != nil {
				t.Errorf("the backup does not open: %v", err)
			}
			if left := tempFiles(t, file); len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

// overlappingBackups is the URL of a proxy that serves s's GET /backup,
// holding each of the first two responses after its first half until both
// have sent their first half.
func overlappingBackups(t *testing.T, s *servertest.Server) string {
	t.Helper()
	client := servertest.HTTPClient()
	t.Cleanup(client.CloseIdleConnections)
	var mu sync.Mutex
	halfway, both := 0, make(chan struct{})
	proxy := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res, err := client.Get(s.URL() + server.BackupPath)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		body, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			http.Error(w, "the server's backup failed", http.StatusBadGateway)
			return
		}
		_, _ = w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		mu.Lock()
		if halfway++; halfway == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both:
		case <-r.Context().Done():
			return
		}
		_, _ = w.Write(body[len(body)/2:])
	}))
	proxy.Config.Protocols = new(http.Protocols)
	proxy.Config.Protocols.SetUnencryptedHTTP2(true)
	proxy.Start()
	t.Cleanup(proxy.Close)
	return proxy.URL
}
