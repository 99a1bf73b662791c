package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestPushDeliversSignedRequests: a queue with a push endpoint has its
// tasks POSTed there, signed under every secret, and the endpoint's
// PushResponse is the attempt's Result. The endpoint is listed as a
// worker and counted in the metrics.
func TestPushDeliversSignedRequests(t *testing.T) {
	s1, k1 := newPushSecret(t)
	s2, k2 := newPushSecret(t)
	env := startPushServer(t, s1, s2)
	ep := startEndpoint(t, [][]byte{k1, k2}, echoAnswer)
	if err := env.setPush(t, "hooks", ep.srv.URL+"/tasks", 4, 0); err != nil {
		t.Fatalf("UpdateQueueConfig: %v", err)
	}
	payloads := []string{`{"n":1}`, `{"s":"ünïcode \"q\""}`, `{"big":123456789012345678901234567890}`}
	ids := make([]string, len(payloads))
	for i, p := range payloads {
		ids[i] = env.enqueue(t, "hooks", p, nil)
	}
	for i, id := range ids {
		ti := env.waitTask(t, id, "completes", inState(conveyorv1.TaskState_TASK_STATE_COMPLETED))
		if string(ti.GetResult()) != payloads[i] {
			t.Fatalf("task %s result %q, want the payload %q", id, ti.GetResult(), payloads[i])
		}
	}
	ep.check()
	for _, c := range ep.waitCalls(len(ids)) {
		if c.signatures != 2 {
			t.Fatalf("request signed %d times under the two secrets, want 2", c.signatures)
		}
		// The deadline is the endpoint's timeout (30 s by default) from the send.
		if d := c.req.GetDeadline().AsTime().Sub(c.at); d < 25*time.Second || d > 31*time.Second {
			t.Fatalf("deadline %s from the request's arrival, want about the 30s default timeout", d)
		}
	}
	ws, err := env.admin.ListWorkers(context.Background(), connect.NewRequest(&conveyorv1.ListWorkersRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, w := range ws.Msg.GetWorkers() {
		if w.GetLabels()["push"] == ep.srv.URL+"/tasks" {
			found = true
			if w.GetConcurrency() != 4 || w.GetQueues()["hooks"] == 0 || w.GetSessionId() != "push:hooks" {
				t.Fatalf("the endpoint's worker entry is %v", w)
			}
		}
	}
	if !found {
		t.Fatalf("ListWorkers does not list the push endpoint: %v", ws.Msg.GetWorkers())
	}
	requireMetric(t, env.s, "conveyor_push_requests_total", "3", `class="success"`, `queue="hooks"`)
}

// requireMetric fails unless the server's /metrics has a sample of name
// with every one of labels (k="v"; a node label may come too) and value.
func requireMetric(t *testing.T, s *servertest.Server, name, value string, labels ...string) {
	t.Helper()
	res, err := http.Get(s.URL() + server.MetricsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	body, _ := io.ReadAll(res.Body)
	var have []string
	for _, l := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(l, name+"{") {
			continue
		}
		have = append(have, l)
		ok := strings.HasSuffix(l, "} "+value)
		for _, kv := range labels {
			ok = ok && strings.Contains(l, kv)
		}
		if ok {
			return
		}
	}
	t.Fatalf("/metrics has no %s with %v of %s; it has %q", name, labels, value, have)
}

// TestPushConcurrencyBound: an endpoint never has more invocations in
// flight than its concurrency, and has that many under load.
func TestPushConcurrencyBound(t *testing.T) {
	env := startPushServer(t)
	gate := make(chan struct{})
	ep := startGatedEndpoint(t, gate)
	const concurrency, n = 3, 60
	ids := enqueueN(t, env.tasks, "bounded", "push.test", n)
	if err := env.setPush(t, "bounded", ep.srv.URL, concurrency, 0); err != nil {
		t.Fatal(err)
	}
	ep.waitCalls(concurrency)
	close(gate)
	for _, id := range ids {
		env.waitTask(t, id, "completes", inState(conveyorv1.TaskState_TASK_STATE_COMPLETED))
	}
	ep.check()
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if ep.max != concurrency {
		t.Fatalf("at most %d invocations were in flight, want exactly the concurrency, %d", ep.max, concurrency)
	}
	if len(ep.calls) != n {
		t.Fatalf("the endpoint received %d requests for %d tasks", len(ep.calls), n)
	}
}

// TestPushAmbiguousAnswers: anything but a 2xx PushResponse with an
// outcome proves nothing, and counts as a failed attempt with last_error
// saying what happened.
func TestPushAmbiguousAnswers(t *testing.T) {
	elsewhere := startEndpoint(t, nil, echoAnswer)
	cases := []struct {
		name, want string
		timeout    time.Duration
		answer     func(w http.ResponseWriter, r *http.Request, c *pushCall)
	}{
		{"500 after the work", "push: HTTP 500", 0, func(w http.ResponseWriter, _ *http.Request, _ *pushCall) {
			w.WriteHeader(http.StatusInternalServerError)
		}},
		{"a redirect is not followed", "push: HTTP 307", 0, func(w http.ResponseWriter, r *http.Request, _ *pushCall) {
			http.Redirect(w, r, elsewhere.srv.URL, http.StatusTemporaryRedirect)
		}},
		{"not a PushResponse", "push: HTTP 200 with a body that is not a PushResponse", 0, func(w http.ResponseWriter, _ *http.Request, _ *pushCall) {
			_, _ = w.Write([]byte("<html>ok</html>"))
		}},
		{"no outcome", "push: HTTP 200 with a PushResponse that sets no outcome", 0, func(w http.ResponseWriter, _ *http.Request, _ *pushCall) {
			respond(w, &conveyorv1.PushResponse{Result: []byte("x")})
		}},
		{"a body past the bound", "push: HTTP 200 with a body over", 0, func(w http.ResponseWriter, _ *http.Request, _ *pushCall) {
			_, _ = w.Write(bytes.Repeat([]byte(" "), 3<<20))
		}},
		{"a truncated body", "push: unexpected EOF", 0, func(w http.ResponseWriter, _ *http.Request, _ *pushCall) {
			w.Header().Set("Content-Length", "1000")
			_, _ = w.Write([]byte(`{"outcome":"TASK_OUTCOME_SUCCESS"`))
			hijackClose(w)
		}},
		{"no answer by the timeout", "push: timeout after 1s", time.Second, func(_ http.ResponseWriter, r *http.Request, _ *pushCall) {
			<-r.Context().Done()
		}},
	}
	env := startPushServer(t)
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ep := startEndpoint(t, nil, tc.answer)
			queue := "ambiguous" + string(rune('a'+i))
			if err := env.setPush(t, queue, ep.srv.URL, 1, tc.timeout); err != nil {
				t.Fatal(err)
			}
			id := env.enqueue(t, queue, `{}`, nil)
			ti := env.waitTask(t, id, "fails its attempt", func(ti *conveyorv1.TaskInfo) bool { return ti.GetRetried() == 1 })
			if ti.GetState() != conveyorv1.TaskState_TASK_STATE_RETRY || !strings.HasPrefix(ti.GetLastError(), tc.want) {
				t.Fatalf("task is %s with last_error %q, want RETRY with %q", ti.GetState(), ti.GetLastError(), tc.want)
			}
		})
	}
	elsewhere.mu.Lock()
	defer elsewhere.mu.Unlock()
	if len(elsewhere.calls) != 0 {
		t.Fatalf("a redirect was followed: the other endpoint received %d requests", len(elsewhere.calls))
	}
}

// hijackClose cuts the connection under a response, mid-body.
func hijackClose(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err == nil {
		_ = buf.Flush()
		_ = conn.Close()
	}
}

// TestPushProvenOutcomes: a PushResponse's outcome decides as a worker's
// Result does.
func TestPushProvenOutcomes(t *testing.T) {
	env := startPushServer(t)
	ep := startEndpoint(t, nil, func(w http.ResponseWriter, _ *http.Request, c *pushCall) {
		switch string(c.req.GetTask().GetPayload()) {
		case `"retry"`:
			respond(w, &conveyorv1.PushResponse{Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY, ErrorMsg: "upstream busy"})
		case `"skip"`:
			respond(w, &conveyorv1.PushResponse{Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY, ErrorMsg: "bad input"})
		default:
			w.WriteHeader(http.StatusAccepted) // any 2xx carries a PushResponse
			respond(w, &conveyorv1.PushResponse{Outcome: conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS, Result: []byte("done")})
		}
	})
	if err := env.setPush(t, "outcomes", ep.srv.URL, 0, 0); err != nil {
		t.Fatal(err)
	}
	retry := env.enqueue(t, "outcomes", `"retry"`, nil)
	skip := env.enqueue(t, "outcomes", `"skip"`, nil)
	ok := env.enqueue(t, "outcomes", `"ok"`, nil)
	if ti := env.waitTask(t, retry, "retries", inState(conveyorv1.TaskState_TASK_STATE_RETRY)); ti.GetLastError() != "upstream busy" || ti.GetRetried() != 1 {
		t.Fatalf("RETRY answer left last_error %q, retried %d", ti.GetLastError(), ti.GetRetried())
	}
	if ti := env.waitTask(t, skip, "is archived", inState(conveyorv1.TaskState_TASK_STATE_ARCHIVED)); ti.GetLastError() != "bad input" {
		t.Fatalf("SKIP_RETRY answer left last_error %q", ti.GetLastError())
	}
	if ti := env.waitTask(t, ok, "completes", inState(conveyorv1.TaskState_TASK_STATE_COMPLETED)); string(ti.GetResult()) != "done" {
		t.Fatalf("result %q", ti.GetResult())
	}
	ep.check()
}

// TestPushRetryAfter: a 429 with Retry-After holds the retry back at
// least that long after the answer arrived.
func TestPushRetryAfter(t *testing.T) {
	env := startPushServer(t)
	ep := startEndpoint(t, nil, func(w http.ResponseWriter, _ *http.Request, _ *pushCall) {
		w.Header().Set("Retry-After", "3600")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	if err := env.setPush(t, "throttled", ep.srv.URL, 0, 0); err != nil {
		t.Fatal(err)
	}
	id := env.enqueue(t, "throttled", `{}`, nil)
	ti := env.waitTask(t, id, "retries", inState(conveyorv1.TaskState_TASK_STATE_RETRY))
	call := ep.waitCalls(1)[0]
	if next := ti.GetNextProcessAt().AsTime(); next.Before(call.at.Add(3599 * time.Second)) {
		t.Fatalf("retry due %s after the answer, want at least the Retry-After, 1h", next.Sub(call.at))
	}
	if !strings.HasPrefix(ti.GetLastError(), "push: HTTP 429") {
		t.Fatalf("last_error %q", ti.GetLastError())
	}
}

// TestPushCancelAbortsTheRequest: canceling an ACTIVE pushed task aborts
// its request, and the task ends CANCELED.
func TestPushCancelAbortsTheRequest(t *testing.T) {
	env := startPushServer(t)
	aborted := make(chan struct{})
	ep := startEndpoint(t, nil, func(_ http.ResponseWriter, r *http.Request, _ *pushCall) {
		<-r.Context().Done()
		close(aborted)
	})
	if err := env.setPush(t, "cancel", ep.srv.URL, 0, time.Hour); err != nil {
		t.Fatal(err)
	}
	id := env.enqueue(t, "cancel", `{}`, nil)
	ep.waitCalls(1)
	cancelTask(t, env.admin, id)
	select {
	case <-aborted:
	case <-time.After(30 * time.Second):
		t.Fatal("the endpoint's request was not aborted by the cancel")
	}
	env.waitTask(t, id, "is canceled", inState(conveyorv1.TaskState_TASK_STATE_CANCELED))
}

// TestPushURLRules: with no push secret only loopback URLs are accepted;
// credentials, fragments and other schemes never are. With a secret, any
// http or https URL is.
func TestPushURLRules(t *testing.T) {
	unsigned := startPushServer(t)
	for _, u := range []string{"http://example.com/hook", "https://10.0.0.1/x", "ftp://127.0.0.1/x", "http://u:p@127.0.0.1/x",
		"http://127.0.0.1/x#frag", "127.0.0.1:80/x"} {
		err := unsigned.setPush(t, "rules", u, 0, 0)
		if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "config.push.url") {
			t.Fatalf("push url %q: %v, want invalid_argument naming config.push.url", u, err)
		}
	}
	for _, u := range []string{"http://localhost:9/x", "http://127.0.0.2:9/x", "http://[::1]:9/x"} {
		if err := unsigned.setPush(t, "rules", u, 0, 0); err != nil {
			t.Fatalf("loopback push url %q refused: %v", u, err)
		}
	}
	if err := unsigned.setPush(t, "rules", "http://127.0.0.1:9/", -1, 0); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Fatalf("negative concurrency: %v", err)
	}
	secret, _ := newPushSecret(t)
	signed := startPushServer(t, secret)
	if err := signed.setPush(t, "rules", "https://hooks.example.com/conveyor", 0, 0); err != nil {
		t.Fatalf("a signing server refused a public URL: %v", err)
	}
	if _, err := server.New(server.Config{PushSecrets: []string{"not-a-secret"}}); err == nil || !strings.Contains(err.Error(), "whsec_") {
		t.Fatalf("a malformed push secret: %v", err)
	}
}

// TestPushGoneStopsTheEndpoint: a 410 asks to be sent nothing more; the
// endpoint is shown as gone until its settings change.
func TestPushGoneStopsTheEndpoint(t *testing.T) {
	env := startPushServer(t)
	gone := true
	ep := startEndpoint(t, nil, func(w http.ResponseWriter, r *http.Request, c *pushCall) {
		if gone {
			w.WriteHeader(http.StatusGone)
			return
		}
		echoAnswer(w, r, c)
	})
	if err := env.setPush(t, "gone", ep.srv.URL, 1, 0); err != nil {
		t.Fatal(err)
	}
	first := env.enqueue(t, "gone", `{}`, nil)
	env.waitTask(t, first, "fails its attempt", func(ti *conveyorv1.TaskInfo) bool { return ti.GetRetried() == 1 })
	servertest.Eventually(t, 10*time.Second, "the endpoint is listed as gone", func() bool {
		ws, err := env.admin.ListWorkers(context.Background(), connect.NewRequest(&conveyorv1.ListWorkersRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range ws.Msg.GetWorkers() {
			if w.GetLabels()["push_gone"] == "410" {
				return true
			}
		}
		return false
	})
	second := env.enqueue(t, "gone", `{}`, nil)
	ep.mu.Lock()
	gone = false
	calls := len(ep.calls)
	ep.mu.Unlock()
	if calls != 1 {
		t.Fatalf("the endpoint received %d requests after its 410, want none", calls-1)
	}
	if err := env.setPush(t, "gone", ep.srv.URL, 2, 0); err != nil { // an operator acts
		t.Fatal(err)
	}
	env.waitTask(t, second, "completes", inState(conveyorv1.TaskState_TASK_STATE_COMPLETED))
}
