package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// serverProc is a `conveyor server` child process on loopback.
type serverProc struct {
	cmd     *exec.Cmd
	url     string
	started time.Time
	ready   time.Duration // from exec to the "serving" line
	stderr  bytes.Buffer
}

// startServer runs `<bin> server` on a free loopback port over dataDir and
// waits for its startup line.
func startServer(bin, dataDir string, extra ...string) (*serverProc, error) {
	args := append([]string{"server", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-level", "warn"}, extra...)
	p := &serverProc{cmd: exec.Command(bin, args...)}
	p.cmd.Env = serverEnv(os.Environ())
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stderr = &p.stderr
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	// urls is closed when the server's stdout ends: without a URL, the
	// server exited (or closed stdout) before serving.
	urls := make(chan string, 1)
	go func() {
		defer close(urls)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "conveyor serving on "); ok {
				urls <- u
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case url, ok := <-urls:
		if !ok {
			err := p.cmd.Wait()
			if err == nil {
				err = errors.New("exit status 0")
			}
			return nil, fmt.Errorf("server exited before serving (%w): %s", err, strings.TrimSpace(p.stderr.String()))
		}
		p.url, p.ready = url, time.Since(p.started)
		return p, nil
	case <-time.After(2 * time.Minute):
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
		return nil, fmt.Errorf("server did not start: %s", p.stderr.String())
	}
}

// serverEnv is the environment of a fresh server: the bench's own, less
// every CONVEYOR_* variable. The server reads its settings from those, so a
// CONVEYOR_LEASE_TTL or CONVEYOR_SESSION_CONCURRENCY left in the shell
// would change what is measured without the run's settings saying so; a
// configured server is measured with --addr instead.
func serverEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, "CONVEYOR_") {
			out = append(out, kv)
		}
	}
	return out
}

// stop ends the server with SIGTERM (graceful) and waits for it.
func (p *serverProc) stop() error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		return errors.New("server did not stop within a minute of SIGTERM")
	}
}

func (p *serverProc) pid() int { return p.cmd.Process.Pid }

// procStatusKB reads a "kB" field (VmHWM, RssAnon, ...) of /proc/<pid>/status.
func procStatusKB(pid int, field string) int64 {
	path := "/proc/self/status"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(rest)
			if len(f) > 0 {
				v, _ := strconv.ParseInt(f[0], 10, 64)
				return v
			}
		}
	}
	return 0
}

func kbToMB(kb int64) float64 { return float64(kb) / 1024 }
