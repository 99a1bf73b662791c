package server_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/oklog/ulid/v2"

	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestRawConnectJSON posts Connect JSON as curl would, with a token, and
// reads the raw answers: unknown fields are ignored, enums are accepted by
// name and by number, times as RFC 3339 and durations as "1.5s", and an
// error is the Connect JSON error naming the field, under its HTTP status.
func TestRawConnectJSON(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{Token: "s3cret"})
	post := func(procedure, token, body string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, s.URL()+procedure, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := servertest.HTTP1Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = res.Body.Close() }()
		raw, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, string(raw)
	}
	id := ulid.Make().String()
	for _, tc := range []struct {
		name, procedure, token, body string
		status                       int
		pattern                      string
	}{
		{"unknown fields, RFC 3339 and duration", "/conveyor.v1.TaskService/Enqueue", "s3cret",
			`{"taskId":"` + id + `","type":"t","queue":"raw","fromTheFuture":{"x":1},
			  "options":{"processAt":"2099-01-02T03:04:05Z","expiresIn":"1.5s","alsoNew":true,
			  "dependsOn":[]}}`,
			http.StatusOK, `"state":\s*"TASK_STATE_SCHEDULED".*"nextProcessAt":\s*"2099-01-02T03:04:05Z"`},
		{"repeat task_id", "/conveyor.v1.TaskService/Enqueue", "s3cret", `{"taskId":"` + id + `","type":"t","queue":"raw"}`,
			http.StatusConflict, `"code":\s*"already_exists"`},
		{"a field by its proto name", "/conveyor.v1.AdminService/ListTasks", "s3cret", `{"queue":"raw","page_size":1}`,
			http.StatusOK, `"id":\s*"` + id + `"`},
		{"enum by name", "/conveyor.v1.AdminService/ListTasks", "s3cret", `{"queue":"raw","state":"TASK_STATE_SCHEDULED"}`,
			http.StatusOK, `"id":\s*"` + id + `"`},
		{"enum by number", "/conveyor.v1.AdminService/ListTasks", "s3cret", `{"queue":"raw","state":1}`,
			http.StatusOK, `"id":\s*"` + id + `"`},
		{"invalid field", "/conveyor.v1.TaskService/Enqueue", "s3cret", `{"type":"t","options":{"priority":10}}`,
			http.StatusBadRequest, `"code":\s*"invalid_argument".*options\.priority`},
		{"unknown task", "/conveyor.v1.TaskService/GetTask", "s3cret", `{"id":"` + ulid.Make().String() + `"}`,
			http.StatusNotFound, `"code":\s*"not_found"`},
		{"no token", "/conveyor.v1.AdminService/ListQueues", "", `{}`,
			http.StatusUnauthorized, `"code":\s*"unauthenticated"`},
		{"wrong token", "/conveyor.v1.AdminService/ListQueues", "nope", `{}`,
			http.StatusUnauthorized, `"code":\s*"unauthenticated"`},
	} {
		status, raw := post(tc.procedure, tc.token, tc.body)
		if status != tc.status || !regexp.MustCompile(`(?s)`+tc.pattern).MatchString(raw) {
			t.Errorf("%s: %d %s, want %d matching %s", tc.name, status, raw, tc.status, tc.pattern)
		}
	}
}

// TestPlainPathsAndTheToken: with a token, GET /metrics needs it like
// every RPC; the dashboard's files and health checks do not.
func TestPlainPathsAndTheToken(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{Token: "s3cret"})
	for _, tc := range []struct {
		path, token string
		status      int
	}{
		{server.MetricsPath, "", http.StatusUnauthorized},
		{server.MetricsPath, "nope", http.StatusUnauthorized},
		{server.MetricsPath, "s3cret", http.StatusOK},
		{"/ui/", "", http.StatusOK},
	} {
		req, err := http.NewRequest(http.MethodGet, s.URL()+tc.path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		res, err := servertest.HTTP1Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != tc.status {
			t.Errorf("GET %s with token %q: %d, want %d", tc.path, tc.token, res.StatusCode, tc.status)
		}
	}
}
