package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/internal/testwait"
)

// TestBenchKilledTakesItsServer: a `conveyor bench` killed with SIGKILL
// mid-run (nothing of it runs after) takes the fresh server it started
// with it.
func TestBenchKilledTakesItsServer(t *testing.T) {
	bin := conveyorBinary(t)
	// More tasks than the test gives it time to enqueue: the run is
	// under way when it is killed.
	b := exec.Command(bin, "bench", "--workload", "W1", "--n", "10000000")
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CONVEYOR_") && !strings.HasPrefix(kv, "TMPDIR=") {
			b.Env = append(b.Env, kv)
		}
	}
	b.Env = append(b.Env, "TMPDIR="+t.TempDir()) // the server's data dir goes there
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = b.Process.Kill()
		_ = b.Wait()
	})

	// Killed while the server starts, the bench would take it along
	// anyway: the server's startup line to the dead bench's pipe is a
	// SIGPIPE. So it is killed once the bench has connected to it (a
	// listening socket and an accepted one): from then on the server
	// writes nothing the bench reads.
	var server int
	testwait.Until(t, 2*time.Minute, "the bench connected to its server", func() bool {
		server = childRunning(b.Process.Pid, "server")
		return server != 0 && sockets(server) >= 2
	})
	t.Cleanup(func() { // only if the test fails: it must be gone by then
		if alive(server) {
			_ = syscall.Kill(server, syscall.SIGKILL)
		}
	})
	if err := b.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = b.Wait()
	testwait.Until(t, time.Minute, "the server gone with its bench", func() bool { return !alive(server) })
}

// childRunning is the pid of a child of parent whose command line has arg
// once it has exec'd, or 0.
func childRunning(parent int, arg string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil || procField(pid, "PPid") != strconv.Itoa(parent) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(d, "cmdline"))
		for _, a := range strings.Split(string(cmdline), "\x00") {
			if a == arg {
				return pid
			}
		}
	}
	return 0
}

// sockets counts pid's open sockets.
func sockets(pid int) int {
	fds, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/fd/*")
	n := 0
	for _, fd := range fds {
		if target, err := os.Readlink(fd); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n
}

// alive reports whether pid is a process that has not exited (a zombie
// waiting for its new parent to reap it has).
func alive(pid int) bool {
	state := procField(pid, "State")
	return state != "" && !strings.HasPrefix(state, "Z")
}

// procField is field of /proc/<pid>/status, or "" when pid is gone.
func procField(pid int, field string) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
