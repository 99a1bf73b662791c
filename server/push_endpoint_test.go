package server_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/durationpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// This file is a push endpoint for the tests: a real HTTP server on
// loopback that checks every request's signature against the server's
// secrets and hands the request to the test's answer.

// newPushSecret is a fresh secret, as an operator would make one.
func newPushSecret(t testing.TB) (secret string, key []byte) {
	t.Helper()
	key = make([]byte, 32)
	_, _ = rand.Read(key)
	return "whsec_" + base64.StdEncoding.EncodeToString(key), key
}

// pushCall is one request the endpoint received, verified.
type pushCall struct {
	req        *conveyorv1.PushRequest
	header     http.Header
	body       []byte
	at         time.Time
	signatures int // signature entries that verified under some key
}

// testEndpoint is a push endpoint: answer decides each response.
type testEndpoint struct {
	t      testing.TB
	srv    *httptest.Server
	keys   [][]byte
	answer func(w http.ResponseWriter, r *http.Request, c *pushCall)

	mu            sync.Mutex
	calls         []*pushCall
	inFlight, max int
	bad           []string // verification failures
	changed       chan struct{}
}

func startEndpoint(t testing.TB, keys [][]byte, answer func(w http.ResponseWriter, r *http.Request, c *pushCall)) *testEndpoint {
	e := &testEndpoint{t: t, keys: keys, answer: answer, changed: make(chan struct{})}
	e.srv = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.srv.Close)
	return e
}

// startGatedEndpoint starts an endpoint whose answers (echoAnswer) each
// wait for a value from gate, or for gate to be closed.
func startGatedEndpoint(t testing.TB, gate <-chan struct{}) *testEndpoint {
	return startEndpoint(t, nil, func(w http.ResponseWriter, r *http.Request, c *pushCall) {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		echoAnswer(w, r, c)
	})
}

func (e *testEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	c := &pushCall{header: r.Header.Clone(), body: body, at: time.Now()}
	var req conveyorv1.PushRequest
	err := protojson.Unmarshal(body, &req)
	c.req = &req
	e.mu.Lock()
	if err != nil {
		e.bad = append(e.bad, "body: "+err.Error())
	}
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" {
		e.bad = append(e.bad, "method or content type: "+r.Method+" "+r.Header.Get("Content-Type"))
	}
	if id := r.Header.Get("webhook-id"); id == "" || id != req.GetAttemptId() || id != req.GetTask().GetAttemptId() {
		e.bad = append(e.bad, "webhook-id "+id+" is not the attempt id "+req.GetAttemptId())
	}
	c.signatures = verifyPush(e.keys, r.Header, body)
	if len(e.keys) > 0 && c.signatures != len(e.keys) {
		e.bad = append(e.bad, "signature "+r.Header.Get("webhook-signature")+" does not verify under every key")
	}
	if len(e.keys) == 0 && r.Header.Get("webhook-signature") != "" {
		e.bad = append(e.bad, "unsigned server sent a signature")
	}
	e.calls = append(e.calls, c)
	e.inFlight++
	e.max = max(e.max, e.inFlight)
	e.notifyLocked()
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.inFlight--
		e.notifyLocked()
		e.mu.Unlock()
	}()
	e.answer(w, r, c)
}

func (e *testEndpoint) notifyLocked() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// verifyPush counts the signature entries that verify under one of keys.
func verifyPush(keys [][]byte, h http.Header, body []byte) int {
	content := h.Get("webhook-id") + "." + h.Get("webhook-timestamp") + "." + string(body)
	n := 0
	for _, entry := range strings.Fields(h.Get("webhook-signature")) {
		sig, ok := strings.CutPrefix(entry, "v1,")
		if !ok {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			continue
		}
		for _, k := range keys {
			mac := hmac.New(sha256.New, k)
			mac.Write([]byte(content))
			if hmac.Equal(mac.Sum(nil), got) {
				n++
				break
			}
		}
	}
	return n
}

// waitCalls waits until the endpoint has received n requests.
func (e *testEndpoint) waitCalls(n int) []*pushCall {
	e.t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		e.mu.Lock()
		calls, ch := append([]*pushCall(nil), e.calls...), e.changed
		e.mu.Unlock()
		if len(calls) >= n {
			return calls
		}
		select {
		case <-ch:
		case <-deadline:
			e.t.Fatalf("the endpoint received %d requests, want %d", len(calls), n)
		}
	}
}

// check fails the test on any request that did not verify.
func (e *testEndpoint) check() {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.bad) > 0 {
		e.t.Fatalf("the endpoint received bad requests: %s", strings.Join(e.bad, "; "))
	}
}

// respond writes a PushResponse.
func respond(w http.ResponseWriter, pr *conveyorv1.PushResponse) {
	b, _ := protojson.Marshal(pr)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// echoAnswer succeeds with the payload as the result.
func echoAnswer(w http.ResponseWriter, _ *http.Request, c *pushCall) {
	respond(w, &conveyorv1.PushResponse{Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS, Result: c.req.GetTask().GetPayload()})
}

// pushEnv is a server with push secrets (none: loopback, unsigned) and
// its clients.
type pushEnv struct {
	s     *servertest.Server
	tasks conveyorv1connect.TaskServiceClient
	admin conveyorv1connect.AdminServiceClient
}

func startPushServer(t *testing.T, secrets ...string) *pushEnv {
	t.Helper()
	return newPushEnv(servertest.Start(t, server.Config{PushSecrets: secrets}))
}

// newPushEnv is s with its clients.
func newPushEnv(s *servertest.Server) *pushEnv {
	hc := servertest.HTTPClient()
	return &pushEnv{s: s, tasks: conveyorv1connect.NewTaskServiceClient(hc, s.URL()),
		admin: conveyorv1connect.NewAdminServiceClient(hc, s.URL())}
}

// setPush points queue at url with concurrency and timeout.
func (p *pushEnv) setPush(t *testing.T, queue, url string, concurrency int32, timeout time.Duration) error {
	t.Helper()
	pe := &conveyorv1.PushEndpoint{Url: url, Concurrency: concurrency}
	if timeout > 0 {
		pe.Timeout = durationpb.New(timeout)
	}
	_, err := p.admin.UpdateQueueConfig(context.Background(), connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{
		Config: &conveyorv1.QueueConfig{Queue: queue, Push: pe}}))
	return err
}

// enqueue adds a task to queue and returns its id.
func (p *pushEnv) enqueue(t *testing.T, queue, payload string, opts *conveyorv1.TaskOptions) string {
	t.Helper()
	return p.enqueueWith(t, &conveyorv1.EnqueueRequest{Queue: queue, Type: "push.test", Payload: []byte(payload), Options: opts})
}

// enqueueType adds a task of type typ to queue and returns its id.
func (p *pushEnv) enqueueType(t *testing.T, queue, typ, payload string) string {
	t.Helper()
	return p.enqueueWith(t, &conveyorv1.EnqueueRequest{Queue: queue, Type: typ, Payload: []byte(payload)})
}

func (p *pushEnv) enqueueWith(t *testing.T, req *conveyorv1.EnqueueRequest) string {
	t.Helper()
	res, err := p.tasks.Enqueue(context.Background(), connect.NewRequest(req))
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	return res.Msg.GetTask().GetId()
}

// waitTask waits until the task satisfies cond, and returns it.
func (p *pushEnv) waitTask(t *testing.T, id, what string, cond func(*conveyorv1.TaskInfo) bool) *conveyorv1.TaskInfo {
	t.Helper()
	var last *conveyorv1.TaskInfo
	servertest.Eventually(t, 30*time.Second, "task "+id+" "+what, func() bool {
		res, err := p.tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
		if err != nil {
			t.Fatalf("GetTask: %v", err)
		}
		last = res.Msg
		return cond(last)
	})
	return last
}

func inState(s conveyorv1.TaskState) func(*conveyorv1.TaskInfo) bool {
	return func(ti *conveyorv1.TaskInfo) bool { return ti.GetState() == s }
}
