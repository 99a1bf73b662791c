package conveyor_test

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestClientAndWorkerOverTLS: on an https:// address the SDK's own HTTP
// client uses WithTLSConfig, negotiates HTTP/2 (which gRPC and the worker
// session need) and sends the token; without the config the server's
// certificate is not trusted, and the call fails as unavailable. One
// tls.Config serves every Client and the Worker at once and is left as
// the caller made it (net/http writes the HTTP/2 protocols into the
// config of a Transport: shared, that would be a data race, which -race
// reports here).
func TestClientAndWorkerOverTLS(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := servertest.SelfSignedCert(t, t.TempDir())
	s := servertest.Start(t, server.Config{TLSCertFile: certFile, TLSKeyFile: keyFile, Token: "s3cret"})
	if !strings.HasPrefix(s.URL(), "https://") {
		t.Fatalf("URL %q, want https", s.URL())
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	trust := conveyor.WithTLSConfig(cfg)
	ctx := context.Background()
	for _, p := range protocols {
		c := newClient(t, s.URL(), trust, conveyor.WithProtocol(p), conveyor.WithToken("s3cret"))
		info, err := c.Enqueue(ctx, "tls", []byte(`{}`))
		if err != nil {
			t.Fatalf("%s: Enqueue over TLS: %v", p, err)
		}
		if got := getTask(t, c, info.ID); got.Type != "tls" {
			t.Errorf("%s: GetTask over TLS: %+v", p, got)
		}
		res, err := c.EnqueueBatch(ctx, []*conveyor.Task{conveyor.NewTask("tls", nil), conveyor.NewTask("tls", nil)})
		if err != nil || res[0].Err != nil || res[1].Err != nil {
			t.Fatalf("%s: EnqueueBatch over TLS: %v %+v", p, err, res)
		}
	}

	untrusted := newClient(t, s.URL(), conveyor.WithToken("s3cret"))
	if _, err := untrusted.Enqueue(ctx, "tls", nil); !errors.Is(err, conveyor.ErrUnavailable) {
		t.Errorf("Enqueue without the server's CA: %v, want ErrUnavailable", err)
	}

	ran := make(chan string, 1)
	w := wtNewWorker(t, s.URL(), trust, conveyor.WithToken("s3cret"), conveyor.WithQueue("tls-session", 1))
	w.HandleFunc("tls", func(_ context.Context, d *conveyor.Delivery) error {
		ran <- d.ID
		return nil
	})
	wtRun(t, w)
	c := newClient(t, s.URL(), trust, conveyor.WithToken("s3cret"))
	info, err := c.Enqueue(ctx, "tls", nil, conveyor.Queue("tls-session"))
	if err != nil {
		t.Fatal(err)
	}
	if got := wtRecv(t, ran, 20*time.Second, "the task run by a worker over TLS"); got != info.ID {
		t.Errorf("the worker ran %s, want %s", got, info.ID)
	}
	if len(cfg.NextProtos) != 0 {
		t.Errorf("the caller's tls.Config was changed: NextProtos = %q", cfg.NextProtos)
	}
}

// TestWorkerSessionIgnoresHTTPClientTimeout: an http.Client given with
// WithHTTPClient may carry a Timeout, which bounds a whole exchange,
// reading the body included. A session is a stream that lasts as long as
// the worker runs, so the Timeout does not apply to it: here one far too
// short for any exchange would otherwise end every session at once, and
// the task would never run.
func TestWorkerSessionIgnoresHTTPClientTimeout(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	hc := &http.Client{Timeout: time.Nanosecond, Transport: servertest.HTTPClient().Transport}
	w := wtNewWorker(t, s.URL(), conveyor.WithHTTPClient(hc), conveyor.WithQueue("client-timeout", 1))
	w.HandleFunc("t", func(context.Context, *conveyor.Delivery) error { return nil })
	wtRun(t, w)
	c := newClient(t, s.URL())
	info, err := c.Enqueue(context.Background(), "t", nil, conveyor.Queue("client-timeout"))
	if err != nil {
		t.Fatal(err)
	}
	servertest.Eventually(t, 20*time.Second, "the task completes", func() bool {
		return getTask(t, c, info.ID).State == conveyor.TaskStateCompleted
	})
	if hc.Timeout != time.Nanosecond {
		t.Errorf("the caller's http.Client was changed: Timeout = %s", hc.Timeout)
	}
}

// encodingLog records the encoding of every response it carries.
type encodingLog struct {
	next http.RoundTripper
	mu   sync.Mutex
	got  []string
}

func (l *encodingLog) RoundTrip(req *http.Request) (*http.Response, error) {
	res, err := l.next.RoundTrip(req)
	if err == nil {
		enc := res.Header.Get("Grpc-Encoding") // gRPC and gRPC-Web
		if enc == "" {
			enc = res.Header.Get("Content-Encoding") // Connect unary
		}
		l.mu.Lock()
		l.got = append(l.got, enc)
		l.mu.Unlock()
	}
	return res, err
}

// TestWithGzip: the server compresses a large response only for a client
// that asked for it with WithGzip, in every protocol, and the results are
// the same either way.
func TestWithGzip(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	for _, p := range protocols {
		for _, gzip := range []bool{false, true} {
			spy := &encodingLog{next: servertest.HTTPClient().Transport}
			opts := []conveyor.Option{conveyor.WithProtocol(p), conveyor.WithHTTPClient(&http.Client{Transport: spy})}
			if gzip {
				opts = append(opts, conveyor.WithGzip())
			}
			c := newClient(t, s.URL(), opts...)
			tasks := make([]*conveyor.Task, 500) // results well past the server's 8 KiB threshold
			for i := range tasks {
				tasks[i] = conveyor.NewTask("gz", []byte(`"x"`))
			}
			res, err := c.EnqueueBatch(context.Background(), tasks)
			if err != nil {
				t.Fatalf("%s gzip=%v: %v", p, gzip, err)
			}
			for i, r := range res {
				if r.Err != nil || r.Task == nil || string(r.Task.Payload) != `"x"` {
					t.Fatalf("%s gzip=%v: results[%d] = %+v", p, gzip, i, r)
				}
			}
			want := ""
			if gzip {
				want = "gzip"
			}
			spy.mu.Lock()
			if len(spy.got) != 1 || spy.got[0] != want {
				t.Errorf("%s gzip=%v: response encodings %q, want [%q]", p, gzip, spy.got, want)
			}
			spy.mu.Unlock()
		}
	}
}

// TestConnOptionsWithoutEffectRefused: an option that would go unused is
// refused by NewClient and NewWorker, with a message that says why, rather
// than silently ignored: a TLS config on an http:// address (the calls,
// token included, would go in the clear) or beside WithHTTPClient, and a
// protocol that is none of the three.
func TestConnOptionsWithoutEffectRefused(t *testing.T) {
	t.Parallel()
	tlsCfg := conveyor.WithTLSConfig(&tls.Config{MinVersion: tls.VersionTLS12})
	for _, tc := range []struct {
		name, addr string
		opts       []conveyor.Option
		want       string
	}{
		{"TLS config on http://", "http://127.0.0.1:7420", []conveyor.Option{tlsCfg}, "does not use TLS"},
		{"TLS config with an HTTP client", "https://127.0.0.1:7420", []conveyor.Option{tlsCfg, conveyor.WithHTTPClient(conveyor.H2CClient())}, "WithHTTPClient"},
		{"unknown protocol", "http://127.0.0.1:7420", []conveyor.Option{conveyor.WithProtocol(conveyor.Protocol(7))}, "Protocol(7) is not a protocol"},
	} {
		if _, err := conveyor.NewClient(tc.addr, tc.opts...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewClient: %v; want an error saying %q", tc.name, err, tc.want)
		}
		wopts := []conveyor.WorkerOption{conveyor.WithQueue("q", 1)}
		for _, o := range tc.opts {
			wopts = append(wopts, o)
		}
		if _, err := conveyor.NewWorker(tc.addr, wopts...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewWorker: %v; want an error saying %q", tc.name, err, tc.want)
		}
	}
}
