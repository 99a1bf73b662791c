package server_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// TestPushToTheGoSDKHandlerInAnotherProcess: a real server pushes to the
// Go SDK's PushHandler running in a process of its own (the conformance
// push worker), both holding the same secret: the signed request is
// verified there, the handler runs, and its result comes back unchanged.
// A second server with another secret is refused (401), which counts as a
// failed attempt.
func TestPushToTheGoSDKHandlerInAnotherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the conformance push worker")
	}
	secret, _ := newPushSecret(t)
	url := startPushWorker(t, secret)

	env := startPushServer(t, secret)
	if err := env.setPush(t, "sdk", url, 4, 0); err != nil {
		t.Fatal(err)
	}
	payload := `{"s":"ünïcode \"quoted\"","big":123456789012345678901234567890}`
	id := env.enqueueType(t, "sdk", "conformance.echo", payload)
	ti := env.waitTask(t, id, "completes", inState(conveyorv1.TaskState_TASK_STATE_COMPLETED))
	if string(ti.GetResult()) != payload {
		t.Fatalf("result %q, want the payload's bytes %q", ti.GetResult(), payload)
	}

	other, _ := newPushSecret(t)
	wrong := startPushServer(t, other)
	if err := wrong.setPush(t, "sdk", url, 1, 0); err != nil {
		t.Fatal(err)
	}
	id = wrong.enqueueType(t, "sdk", "conformance.echo", `{}`)
	ti = wrong.waitTask(t, id, "fails its attempt", func(ti *conveyorv1.TaskInfo) bool { return ti.GetRetried() == 1 })
	if ti.GetLastError() != "push: HTTP 401" {
		t.Fatalf("a request signed under another secret: last_error %q, want push: HTTP 401", ti.GetLastError())
	}
}

// startPushWorker builds and starts sdks/go/conformance/pushworker with
// secret and returns its URL; the test's end stops it.
func startPushWorker(t *testing.T, secret string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pushworker")
	if out, err := exec.Command("go", "build", "-o", bin, "../sdks/go/conformance/pushworker").CombinedOutput(); err != nil {
		t.Fatalf("go build pushworker: %v\n%s", err, out)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "CONVEYOR_PUSH_SECRET="+secret, "CONVEYOR_PUSH_LISTEN=127.0.0.1:0")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	select {
	case line := <-lines:
		url, ok := strings.CutPrefix(line, "listening ")
		if !ok {
			t.Fatalf("pushworker printed %q", line)
		}
		return url
	case <-time.After(60 * time.Second):
		t.Fatal("pushworker did not start")
	}
	return ""
}
