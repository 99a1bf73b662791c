package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/sdks/go/conformance/handlers"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// newSecret returns a push secret as written and its key.
func newSecret(t *testing.T) (string, []byte) {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(key), key
}

// post sends a PushRequest for a task of taskType with payload to url,
// signed with key unless it is nil, and returns the answer's status and
// body.
func post(t *testing.T, url, taskType string, payload, key []byte) (int, []byte) {
	t.Helper()
	id := "attempt-" + rand.Text()
	body, err := protojson.Marshal(&conveyorv1.PushRequest{
		Task:     &conveyorv1.TaskEnvelope{Id: "task-" + rand.Text(), Type: taskType, Payload: payload, AttemptId: id},
		Deadline: timestamppb.New(time.Now().Add(time.Minute)), AttemptId: id,
	})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	if key != nil {
		m := hmac.New(sha256.New, key)
		m.Write([]byte(id + "." + ts + "."))
		m.Write(body)
		req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(m.Sum(nil)))
	}
	c := &http.Client{Transport: &http.Transport{}}
	defer c.CloseIdleConnections()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// echoed checks a 200 answering conformance.echo with payload.
func echoed(t *testing.T, status int, body, payload []byte) {
	t.Helper()
	r := &conveyorv1.PushResponse{}
	if status != http.StatusOK {
		t.Fatalf("status %d (%s), want 200", status, body)
	}
	if err := protojson.Unmarshal(body, r); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS || !bytes.Equal(r.GetResult(), payload) {
		t.Fatalf("response %v, want SUCCESS with the payload %q as its result", r, payload)
	}
}

// TestPushWorkerProcess builds the program, runs it as a child process
// with a secret, POSTs it a signed conformance.echo and an unsigned one,
// and stops it with SIGTERM: it prints one line, "listening http://...",
// answers the echo with the payload's bytes, refuses the unsigned one
// (401), and exits 0.
func TestPushWorkerProcess(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "pushworker")
	if out, err := exec.Command("go", "build", "-race", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	secret, key := newSecret(t)
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "CONVEYOR_PUSH_SECRET="+secret, "CONVEYOR_PUSH_LISTEN=127.0.0.1:0", "CONVEYOR_PUSH_DEV=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := false
	t.Cleanup(func() {
		if !exited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() {
		t.Fatalf("no line on stdout: %v; stderr:\n%s", lines.Err(), stderr.String())
	}
	url, ok := strings.CutPrefix(lines.Text(), "listening ")
	if !ok || !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("first line %q, want \"listening http://127.0.0.1:<port>\"", lines.Text())
	}

	payload := []byte{0, 'e', 'c', 'h', 'o', 0xff}
	status, body := post(t, url, handlers.TypeEcho, payload, key)
	echoed(t, status, body, payload)
	if status, body := post(t, url, handlers.TypeEcho, payload, nil); status != http.StatusUnauthorized {
		t.Fatalf("unsigned request: status %d (%s), want 401", status, body)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(stdout)
	if err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	exited = true
	if err != nil {
		t.Fatalf("exit after SIGTERM: %v, want 0; stderr:\n%s", err, stderr.String())
	}
	if len(rest) != 0 {
		t.Fatalf("stdout after the first line: %q, want nothing", rest)
	}
}

// TestPushWorkerDevelopmentMode runs the program in process with
// CONVEYOR_PUSH_DEV=1 and no secret: it takes an unsigned request, and
// exits 0 once stopped.
func TestPushWorkerDevelopmentMode(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	out, lines := io.Pipe()
	var stderr bytes.Buffer
	exit := make(chan int, 1)
	go func() {
		exit <- run(ctx, envOf(map[string]string{"CONVEYOR_PUSH_DEV": "1", "CONVEYOR_BATCH_TYPES": handlers.TypeEcho}), lines, &stderr)
		_ = lines.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	url := strings.TrimSpace(strings.TrimPrefix(line, "listening "))
	status, body := post(t, url, handlers.TypeEcho, []byte("as a batch of one"), nil)
	echoed(t, status, body, []byte("as a batch of one"))
	stop()
	if code := <-exit; code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, stderr.String())
	}
}

// TestPushWorkerBadConfigExits2 pins exit status 2 and a message naming
// what is wrong.
func TestPushWorkerBadConfigExits2(t *testing.T) {
	for name, tc := range map[string]struct {
		env  map[string]string
		want string
	}{
		"no secret":         {map[string]string{}, "set CONVEYOR_PUSH_SECRET"},
		"empty secrets":     {map[string]string{"CONVEYOR_PUSH_SECRET": " , "}, "set CONVEYOR_PUSH_SECRET"},
		"bad secret":        {map[string]string{"CONVEYOR_PUSH_SECRET": "whsec_c2hvcnQ="}, "push secret 1 of 1"},
		"bad dev":           {map[string]string{"CONVEYOR_PUSH_DEV": "yes"}, "CONVEYOR_PUSH_DEV must be 1 or 0"},
		"dev 0, no secret":  {map[string]string{"CONVEYOR_PUSH_DEV": "0"}, "set CONVEYOR_PUSH_SECRET"},
		"bad listen":        {map[string]string{"CONVEYOR_PUSH_DEV": "1", "CONVEYOR_PUSH_LISTEN": "127.0.0.1:notaport"}, "CONVEYOR_PUSH_LISTEN"},
		"secret beside dev": {map[string]string{"CONVEYOR_PUSH_DEV": "1", "CONVEYOR_PUSH_SECRET": "nope"}, "push secret 1 of 1"},
	} {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), envOf(tc.env), &stdout, &stderr); code != exitBadConfig {
				t.Fatalf("exit %d, want %d", code, exitBadConfig)
			}
			if !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
				t.Fatalf("stderr %q (want %q), stdout %q (want none)", stderr.String(), tc.want, stdout.String())
			}
		})
	}
}
