package bench

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
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
	// exited is closed once the process exited and was waited for;
	// waitErr is then its exit.
	exited  chan struct{}
	waitErr error
}

// startServer runs `<bin> server` on a free loopback port over dataDir and
// waits for its startup line. Where the kernel can (Linux), the server is
// killed when the bench dies, even by SIGKILL: a bench killed mid-run
// leaves no server behind.
func startServer(bin, dataDir string, extra ...string) (*serverProc, error) {
	args := append([]string{"server", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-level", "warn"}, extra...)
	p := &serverProc{cmd: exec.Command(bin, args...), exited: make(chan struct{})}
	p.cmd.Env = serverEnv(os.Environ())
	setParentDeathSignal(p.cmd)
	// A pipe of our own rather than StdoutPipe: Wait, which runs as soon
	// as the server starts (launch), would close StdoutPipe's under the
	// reader.
	stdout, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stdout = w
	p.cmd.Stderr = &p.stderr
	p.started = time.Now()
	err = p.launch()
	_ = w.Close() // the server has its own copy
	if err != nil {
		_ = stdout.Close()
		return nil, err
	}
	// urls is closed when the server's stdout ends: without a URL, the
	// server exited (or closed stdout) before serving.
	urls := make(chan string, 1)
	go func() {
		defer close(urls)
		defer func() { _ = stdout.Close() }()
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
			<-p.exited
			err := p.waitErr
			if err == nil {
				err = errors.New("exit status 0")
			}
			return nil, fmt.Errorf("server exited before serving (%w): %s", err, strings.TrimSpace(p.stderr.String()))
		}
		p.url, p.ready = url, time.Since(p.started)
		return p, nil
	case <-time.After(2 * time.Minute):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return nil, fmt.Errorf("server did not start: %s", p.stderr.String())
	}
}

// launch starts the server from a goroutine locked to its OS thread, which
// then waits for the server to exit. The parent-death signal
// (setParentDeathSignal) fires when the thread that forked the child ends,
// not the process, and the Go runtime ends a thread when a goroutine
// locked to it exits without unlocking (any library may do that): the
// forking thread must outlive the server, so it is kept for this
// goroutine alone until then.
func (p *serverProc) launch() error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := p.cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	return <-started
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
	select {
	case <-p.exited:
		return p.waitErr
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
