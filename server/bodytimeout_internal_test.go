package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// TestBodyTimeout: over HTTP/1.1, a body that stops coming fails its
// read at the deadline, and a handler that read its whole body may work
// past the deadline with its context intact (the deadline bounds the
// client's sending, never the handler's work), with and without a body.
func TestBodyTimeout(t *testing.T) {
	t.Parallel()
	const d = 100 * time.Millisecond
	srv := httptest.NewServer(bodyTimeout(d, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			if !errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("reading a stalled body: %v, want the deadline", err)
			}
			w.WriteHeader(http.StatusRequestTimeout)
			return
		}
		select {
		case <-r.Context().Done():
			t.Errorf("the call was canceled while its handler worked: %v", context.Cause(r.Context()))
		case <-time.After(5 * d):
		}
		w.WriteHeader(http.StatusOK)
	})))
	defer srv.Close()

	for _, body := range []io.Reader{strings.NewReader("whole"), nil} {
		res, err := http.Post(srv.URL, "text/plain", body)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("a slow handler of a whole body (%v): HTTP %d", body != nil, res.StatusCode)
		}
	}

	stalled, hold := io.Pipe()
	defer func() { _ = hold.Close() }()
	go func() { _, _ = hold.Write([]byte("part")) }()
	res, err := http.Post(srv.URL, "text/plain", stalled)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("a stalled body: HTTP %d, want the handler's 408", res.StatusCode)
	}
}
