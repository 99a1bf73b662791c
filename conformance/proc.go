package conformance

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Proc is a running conformance worker.
type Proc struct {
	t   testing.TB
	cmd *exec.Cmd

	// Ready receives the session id of each "ready <session_id>" line.
	Ready chan string

	mu        sync.Mutex
	stderr    bytes.Buffer
	badStdout []string
	done      chan struct{}
	exit      int
}

// Start runs the worker command with env added to a minimal environment,
// and kills it (its whole process group) at the test's end. It fails the
// test at cleanup if the worker printed anything on stdout but ready lines.
func Start(t testing.TB, command []string, env map[string]string) *Proc {
	t.Helper()
	p := &Proc{t: t, Ready: make(chan string, 64), done: make(chan struct{})}
	p.cmd = exec.Command(command[0], command[1:]...)
	p.cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", command, err)
	}
	read := make(chan struct{})
	go p.readStdout(stdout, read)
	go func() {
		<-read // Wait must not close the pipe under the reader
		err := p.cmd.Wait()
		p.mu.Lock()
		p.exit = 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.exit = ee.ExitCode()
		} else if err != nil {
			p.exit = -1
		}
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		p.mu.Lock()
		defer p.mu.Unlock()
		if len(p.badStdout) > 0 {
			t.Errorf("the worker printed on stdout lines other than ready: %q", p.badStdout)
		}
		if t.Failed() {
			t.Logf("worker stderr:\n%s", p.stderr.String())
		}
	})
	return p
}

func (p *Proc) readStdout(r interface{ Read([]byte) (int, error) }, read chan struct{}) {
	defer close(read)
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		id, ok := strings.CutPrefix(line, "ready ")
		if !ok || id == "" || strings.ContainsAny(id, " \t") {
			p.mu.Lock()
			p.badStdout = append(p.badStdout, line)
			p.mu.Unlock()
			continue
		}
		select {
		case p.Ready <- id:
		default:
		}
	}
}

// WaitReady waits for the next ready line and returns its session id.
func (p *Proc) WaitReady(timeout time.Duration) string {
	p.t.Helper()
	select {
	case id := <-p.Ready:
		return id
	case <-p.done:
		p.t.Fatalf("the worker exited (status %d) before it was ready; stderr:\n%s", p.Exit(), p.Stderr())
	case <-time.After(timeout):
		p.t.Fatalf("the worker printed no ready line within %s", timeout)
	}
	return ""
}

// Signal sends sig to the worker.
func (p *Proc) Signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal the worker: %v", err)
	}
}

// WaitExit waits for the worker to exit and returns its status.
func (p *Proc) WaitExit(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.Exit()
	case <-time.After(timeout):
		p.t.Fatalf("the worker did not exit within %s", timeout)
	}
	return 0
}

// Exited reports whether the worker has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Exit is the worker's exit status, once it exited.
func (p *Proc) Exit() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// Stderr is what the worker wrote on stderr so far.
func (p *Proc) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(b)
}
