package conveyor_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// pushKey is a push secret as written and its key.
type pushKey struct {
	secret string
	key    []byte
}

func newPushKey(t *testing.T) pushKey {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return pushKey{secret: "whsec_" + base64.StdEncoding.EncodeToString(key), key: key}
}

// signPush is the webhook-signature of a request: one v1 entry per key,
// each the base64 HMAC-SHA256 of "<id>.<ts>.<body>", as the server signs.
func signPush(id string, ts int64, body []byte, keys ...pushKey) string {
	entries := make([]string, len(keys))
	for i, k := range keys {
		m := hmac.New(sha256.New, k.key)
		m.Write([]byte(id + "." + strconv.FormatInt(ts, 10) + "."))
		m.Write(body)
		entries[i] = "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	return strings.Join(entries, " ")
}

// pushCall is one request to a push endpoint.
type pushCall struct {
	id   string
	at   time.Time
	body []byte
	keys []pushKey // none: unsigned
}

// newPushCall builds a request for a task of taskType with payload, its
// attempt id fresh, its deadline an hour away, signed at now by keys.
func newPushCall(t *testing.T, taskType string, payload []byte, keys ...pushKey) *pushCall {
	t.Helper()
	id := "attempt-" + rand.Text()
	req := &conveyorv1.PushRequest{
		Task: &conveyorv1.TaskEnvelope{Id: "task-" + rand.Text(), Type: taskType, Queue: "q", Payload: payload,
			AttemptId: id},
		Deadline:  timestamppb.New(time.Now().Add(time.Hour)),
		AttemptId: id,
	}
	return &pushCall{id: id, at: time.Now(), body: marshalPush(t, req), keys: keys}
}

func marshalPush(t *testing.T, req *conveyorv1.PushRequest) []byte {
	t.Helper()
	b, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// header is the request's Standard Webhooks headers.
func (c *pushCall) header() http.Header {
	h := http.Header{"Content-Type": {"application/json"}}
	h.Set("webhook-id", c.id)
	h.Set("webhook-timestamp", strconv.FormatInt(c.at.Unix(), 10))
	if len(c.keys) > 0 {
		h.Set("webhook-signature", signPush(c.id, c.at.Unix(), c.body, c.keys...))
	}
	return h
}

// pushAnswer is an endpoint's answer.
type pushAnswer struct {
	status int
	header http.Header
	body   []byte
}

// response decodes a 200's PushResponse.
func (a *pushAnswer) response(t *testing.T) *conveyorv1.PushResponse {
	t.Helper()
	if a.status != http.StatusOK {
		t.Fatalf("status %d (%s), want 200", a.status, a.body)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	r := &conveyorv1.PushResponse{}
	if err := protojson.Unmarshal(a.body, r); err != nil {
		t.Fatalf("decode the PushResponse %s: %v", a.body, err)
	}
	return r
}

// refused checks that the answer is status, with a plain-text message
// containing want.
func (a *pushAnswer) refused(t *testing.T, status int, want string) {
	t.Helper()
	if a.status != status || !strings.Contains(string(a.body), want) {
		t.Fatalf("answer %d %q, want %d with %q", a.status, a.body, status, want)
	}
	if ct := a.header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type %q, want text/plain", ct)
	}
}

// pushEndpoint is a push handler on a loopback HTTP server.
type pushEndpoint struct {
	srv *httptest.Server
}

// newPushEndpoint serves w's push handler, built with opts, on loopback.
func newPushEndpoint(t *testing.T, w *conveyor.Worker, opts ...conveyor.PushOption) *pushEndpoint {
	t.Helper()
	h, err := w.PushHandler(opts...)
	if err != nil {
		t.Fatalf("PushHandler: %v", err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &pushEndpoint{srv: srv}
}

// pushWorker is a push-only Worker with the handlers register installs.
func pushWorker(t *testing.T, register func(w *conveyor.Worker)) *conveyor.Worker {
	t.Helper()
	w, err := conveyor.NewPushWorker()
	if err != nil {
		t.Fatal(err)
	}
	register(w)
	return w
}

func (e *pushEndpoint) send(t *testing.T, c *pushCall) *pushAnswer {
	t.Helper()
	return e.do(t, context.Background(), http.MethodPost, bytes.NewReader(c.body), c.header())
}

func (e *pushEndpoint) do(t *testing.T, ctx context.Context, method string, body io.Reader, h http.Header) *pushAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, e.srv.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &pushAnswer{status: resp.StatusCode, header: resp.Header, body: b}
}

// echoWorker is a push-only Worker whose "echo" handler succeeds with the
// payload as its result and counts its runs on ran.
func echoWorker(t *testing.T, ran chan<- string) *conveyor.Worker {
	return pushWorker(t, func(w *conveyor.Worker) {
		w.HandleFunc("echo", func(_ context.Context, d *conveyor.Delivery) error {
			if ran != nil {
				ran <- d.AttemptID
			}
			d.SetResult(d.Payload)
			return nil
		})
	})
}
