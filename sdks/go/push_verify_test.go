package conveyor_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// TestPushSignedByEitherSecret pins rotation: an endpoint holding two
// secrets accepts a request signed with either, and one whose signature
// header also carries entries it cannot match.
func TestPushSignedByEitherSecret(t *testing.T) {
	t.Parallel()
	a, b, other := newPushKey(t), newPushKey(t), newPushKey(t)
	e := newPushEndpoint(t, echoWorker(t, nil), conveyor.WithPushSecrets(a.secret, b.secret))
	for name, keys := range map[string][]pushKey{"first": {a}, "second": {b}, "among others": {other, b}} {
		c := newPushCall(t, "echo", []byte(`"`+name+`"`), keys...)
		r := e.send(t, c).response(t)
		if r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS || string(r.GetResult()) != `"`+name+`"` {
			t.Fatalf("%s: response %v", name, r)
		}
	}
}

// TestPushRefusesForgedRequests pins 401 for a request whose body,
// signature or key does not match, and that the handler does not run.
func TestPushRefusesForgedRequests(t *testing.T) {
	t.Parallel()
	k := newPushKey(t)
	ran := make(chan string, 10)
	e := newPushEndpoint(t, echoWorker(t, ran), conveyor.WithPushSecrets(k.secret))
	for name, tamper := range map[string]func(c *pushCall, h http.Header){
		"tampered body": func(c *pushCall, _ http.Header) { c.body = append(c.body[:len(c.body)-1:len(c.body)-1], " }"...) },
		"tampered signature": func(_ *pushCall, h http.Header) {
			s := []byte(h.Get("webhook-signature"))
			s[5] ^= 1
			h.Set("webhook-signature", string(s))
		},
		"other key": func(c *pushCall, h http.Header) {
			h.Set("webhook-signature", signPush(c.id, c.at.Unix(), c.body, newPushKey(t)))
		},
		"other version": func(_ *pushCall, h http.Header) {
			h.Set("webhook-signature", strings.Replace(h.Get("webhook-signature"), "v1,", "v2,", 1))
		},
		"tampered id":     func(_ *pushCall, h http.Header) { h.Set("webhook-id", "attempt-other") },
		"not base64":      func(_ *pushCall, h http.Header) { h.Set("webhook-signature", "v1,!!!") },
		"moved timestamp": func(c *pushCall, h http.Header) { h.Set("webhook-timestamp", strconv.FormatInt(c.at.Unix()-1, 10)) },
	} {
		c := newPushCall(t, "echo", []byte(`"ok"`), k)
		h := c.header()
		tamper(c, h)
		a := e.do(t, context.Background(), http.MethodPost, bytes.NewReader(c.body), h)
		if a.status != http.StatusUnauthorized {
			t.Fatalf("%s: status %d (%s), want 401", name, a.status, a.body)
		}
	}
	select {
	case id := <-ran:
		t.Fatalf("the handler ran for a refused request (%s)", id)
	default:
	}
}

// TestPushRefusesMissingHeaders pins 401 naming each missing header.
func TestPushRefusesMissingHeaders(t *testing.T) {
	t.Parallel()
	k := newPushKey(t)
	e := newPushEndpoint(t, echoWorker(t, nil), conveyor.WithPushSecrets(k.secret))
	for _, name := range []string{"webhook-id", "webhook-timestamp", "webhook-signature"} {
		c := newPushCall(t, "echo", []byte(`1`), k)
		h := c.header()
		h.Del(name)
		e.do(t, context.Background(), http.MethodPost, bytes.NewReader(c.body), h).
			refused(t, http.StatusUnauthorized, "the "+name+" header is missing")
	}
	// Unsigned, as a server with no secret sends it.
	e.send(t, newPushCall(t, "echo", []byte(`1`))).refused(t, http.StatusUnauthorized, "webhook-signature header is missing")
}

// TestPushRefusesStaleTimestamps pins 401 for a timestamp 6 minutes old or
// ahead (the tolerance is 5) or not a number, and WithPushTolerance.
func TestPushRefusesStaleTimestamps(t *testing.T) {
	t.Parallel()
	k := newPushKey(t)
	e := newPushEndpoint(t, echoWorker(t, nil), conveyor.WithPushSecrets(k.secret))
	old := newPushCall(t, "echo", []byte(`1`), k)
	old.at = time.Now().Add(-6 * time.Minute)
	e.send(t, old).refused(t, http.StatusUnauthorized, "stale request")
	ahead := newPushCall(t, "echo", []byte(`1`), k)
	ahead.at = time.Now().Add(6 * time.Minute)
	e.send(t, ahead).refused(t, http.StatusUnauthorized, "in the future")
	c := newPushCall(t, "echo", []byte(`1`), k)
	h := c.header()
	h.Set("webhook-timestamp", "yesterday")
	e.do(t, context.Background(), http.MethodPost, bytes.NewReader(c.body), h).
		refused(t, http.StatusUnauthorized, "not a decimal count of Unix seconds")

	// A tolerance of 10 minutes takes the request 6 minutes old.
	wide := newPushEndpoint(t, echoWorker(t, nil), conveyor.WithPushSecrets(k.secret), conveyor.WithPushTolerance(10*time.Minute))
	old = newPushCall(t, "echo", []byte(`1`), k)
	old.at = time.Now().Add(-6 * time.Minute)
	if r := wide.send(t, old).response(t); r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Fatalf("response %v", r)
	}
}

// TestPushRefusesReplay pins 409 for a request sent again, and that the
// handler ran once.
func TestPushRefusesReplay(t *testing.T) {
	t.Parallel()
	k := newPushKey(t)
	ran := make(chan string, 10)
	e := newPushEndpoint(t, echoWorker(t, ran), conveyor.WithPushSecrets(k.secret))
	c := newPushCall(t, "echo", []byte(`1`), k)
	e.send(t, c).response(t)
	e.send(t, c).refused(t, http.StatusConflict, "replayed request")
	if n := len(ran); n != 1 {
		t.Fatalf("the handler ran %d times, want 1", n)
	}
}

// TestPushDevelopmentMode pins that an endpoint in development mode takes
// unsigned requests, still verifies signed ones against its secrets, and
// takes any request when it has none.
func TestPushDevelopmentMode(t *testing.T) {
	t.Parallel()
	dev := newPushEndpoint(t, echoWorker(t, nil), conveyor.WithPushDevelopmentMode())
	for payload, keys := range map[string][]pushKey{"1": nil, "2": {newPushKey(t)}} {
		r := dev.send(t, newPushCall(t, "echo", []byte(payload), keys...)).response(t)
		if r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS || string(r.GetResult()) != payload {
			t.Fatalf("response %v", r)
		}
	}
	// Without headers at all, as with curl.
	c := newPushCall(t, "echo", []byte(`3`))
	if r := dev.do(t, context.Background(), http.MethodPost, bytes.NewReader(c.body), http.Header{}).response(t); string(r.GetResult()) != "3" {
		t.Fatalf("response %v", r)
	}

	k := newPushKey(t)
	both := newPushEndpoint(t, echoWorker(t, nil), conveyor.WithPushDevelopmentMode(), conveyor.WithPushSecrets(k.secret))
	both.send(t, newPushCall(t, "echo", []byte(`1`))).response(t)
	both.send(t, newPushCall(t, "echo", []byte(`1`), k)).response(t)
	both.send(t, newPushCall(t, "echo", []byte(`1`), newPushKey(t))).refused(t, http.StatusUnauthorized, "bad signature")
}

// TestPushHandlerConfiguration pins PushHandler's refusals: no secret and
// no development mode, a bad secret (named by position, never quoted), a
// bad tolerance, a Worker with no handlers; and CONVEYOR_PUSH_SECRET.
func TestPushHandlerConfiguration(t *testing.T) {
	k, k2 := newPushKey(t), newPushKey(t)
	w := echoWorker(t, nil)
	t.Setenv("CONVEYOR_PUSH_SECRET", "")
	if _, err := w.PushHandler(); err == nil || !strings.Contains(err.Error(), "needs a secret") {
		t.Fatalf("PushHandler() with no secret = %v, want an error saying it needs a secret", err)
	}
	if _, err := w.PushHandler(conveyor.WithPushSecrets("", " ")); err == nil || !strings.Contains(err.Error(), "needs a secret") {
		t.Fatalf("PushHandler with empty secrets = %v", err)
	}
	bad := "whsec_" + strings.Repeat("A", 8) // a 6-byte key
	for secret, want := range map[string]string{
		bad:                        "push secret 2 of 2 (WithPushSecrets): its key must be 24..64 bytes, got 6",
		"secret-" + k.secret[6:]:   `push secret 2 of 2 (WithPushSecrets): it must start with "whsec_"`,
		"whsec_" + k.secret + "!!": "push secret 2 of 2 (WithPushSecrets): the part after whsec_ is not standard base64",
	} {
		_, err := w.PushHandler(conveyor.WithPushSecrets(k.secret, secret))
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), secret) {
			t.Fatalf("PushHandler with a bad secret = %v, want %q (and no secret quoted)", err, want)
		}
	}
	if _, err := w.PushHandler(conveyor.WithPushDevelopmentMode(), conveyor.WithPushTolerance(0)); err == nil ||
		!strings.Contains(err.Error(), "tolerance must be > 0") {
		t.Fatalf("PushHandler with tolerance 0 = %v", err)
	}
	empty, err := conveyor.NewPushWorker()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := empty.PushHandler(conveyor.WithPushDevelopmentMode()); err == nil || !strings.Contains(err.Error(), "no handlers") {
		t.Fatalf("PushHandler on a Worker with no handlers = %v", err)
	}

	// The environment: comma-separated, spaces and empty entries ignored.
	t.Setenv("CONVEYOR_PUSH_SECRET", k.secret+" , "+k2.secret+",")
	e := newPushEndpoint(t, w)
	e.send(t, newPushCall(t, "echo", []byte(`1`), k2)).response(t)
	e.send(t, newPushCall(t, "echo", []byte(`1`))).refused(t, http.StatusUnauthorized, "webhook-signature header is missing")
	t.Setenv("CONVEYOR_PUSH_SECRET", "whsec_short")
	if _, err := w.PushHandler(); err == nil || !strings.Contains(err.Error(), "push secret 1 of 1 (CONVEYOR_PUSH_SECRET)") {
		t.Fatalf("PushHandler with a bad CONVEYOR_PUSH_SECRET = %v", err)
	}
	// An option overrides the environment.
	dev := newPushEndpoint(t, w, conveyor.WithPushDevelopmentMode())
	dev.send(t, newPushCall(t, "echo", []byte(`1`))).response(t)
}

// TestPushRefusesBadRequests pins 405 for a GET, 413 for a body over 8 MiB
// (declared or chunked), and 400 for a body that is no PushRequest, one
// without a task, and one whose attempt_id is not its webhook-id.
func TestPushRefusesBadRequests(t *testing.T) {
	t.Parallel()
	k := newPushKey(t)
	e := newPushEndpoint(t, echoWorker(t, nil), conveyor.WithPushSecrets(k.secret))

	get := e.do(t, context.Background(), http.MethodGet, nil, http.Header{})
	get.refused(t, http.StatusMethodNotAllowed, "POST only")
	if allow := get.header.Get("Allow"); allow != http.MethodPost {
		t.Fatalf("Allow: %q, want POST", allow)
	}

	big := &pushCall{id: "attempt-big", at: time.Now(), body: bytes.Repeat([]byte(" "), conveyor.MaxPushRequestBytes+1), keys: []pushKey{k}}
	e.send(t, big).refused(t, http.StatusRequestEntityTooLarge, "8 MiB")
	chunked := io.MultiReader(bytes.NewReader(big.body)) // no length: sent chunked
	e.do(t, context.Background(), http.MethodPost, chunked, big.header()).refused(t, http.StatusRequestEntityTooLarge, "8 MiB")

	for name, tc := range map[string]struct {
		body []byte
		want string
	}{
		"not JSON": {[]byte(`task`), "not a PushRequest in proto3 JSON"},
		"no task":  {marshalPush(t, &conveyorv1.PushRequest{AttemptId: "attempt-x"}), "has no task"},
		"attempt id": {marshalPush(t, &conveyorv1.PushRequest{AttemptId: "attempt-y",
			Task: &conveyorv1.TaskEnvelope{Id: "t", Type: "echo"}}), `attempt_id "attempt-y" is not its webhook-id "attempt-x"`},
	} {
		c := &pushCall{id: "attempt-x", at: time.Now(), body: tc.body, keys: []pushKey{k}}
		if name != "attempt id" {
			c.id = "attempt-" + name
		}
		e.send(t, c).refused(t, http.StatusBadRequest, tc.want)
	}

	// Unknown fields are skipped, as the protocol grows.
	c := newPushCall(t, "echo", []byte(`7`), k)
	c.body = append([]byte(`{"future_field": 1, `), c.body[1:]...)
	if r := e.send(t, c).response(t); string(r.GetResult()) != "7" {
		t.Fatalf("response %v", r)
	}
}
