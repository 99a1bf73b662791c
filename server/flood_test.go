package server_test

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

const (
	checkPath = "/grpc.health.v1.Health/Check"
	watchPath = "/grpc.health.v1.Health/Watch"
)

// TestFloodWithoutTheTokenLeavesClientsWithItServed: a client without the
// token floods a server that has one, up to every bound and past it:
// health calls on one connection, Watch streams on the server, connections
// that never prove themselves. Each bound holds (the call past it fails
// with resource_exhausted; the connection past it closes the oldest
// unproven one), and producers and workers with the token go on working
// throughout, a worker session opened before the connection flood
// included.
func TestFloodWithoutTheTokenLeavesClientsWithItServed(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{Token: "s3cret"})
	addr := s.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// Health calls on one connection, up to its bound and one past it.
	hc := servertest.HTTPClient()
	health := grpchealth.NewClient(hc, s.URL(), connect.WithGRPC())
	for range server.MaxHealthCallsPerConn {
		if ev := <-health.Watch(ctx, &grpchealth.CheckRequest{}); ev.Err != nil {
			t.Fatalf("a Watch stream within the connection's bound: %v", ev.Err)
		}
	}
	_, err := health.Check(ctx, &grpchealth.CheckRequest{})
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "one connection") {
		t.Fatalf("a health call past the connection's bound: %v, want resource_exhausted naming it", err)
	}

	// Watch streams up to the server's bound, MaxHealthCallsPerConn on each
	// connection; then one more on a new connection is refused, while a
	// Check (no stream held) is still answered.
	var floods []*rawH2
	for open := server.MaxHealthCallsPerConn; open < server.MaxWatchStreams; open += server.MaxHealthCallsPerConn {
		c := dialRawH2(t, addr, true)
		for range server.MaxHealthCallsPerConn {
			c.grpcCall(t, watchPath, true)
		}
		floods = append(floods, c)
	}
	servertest.Eventually(t, time.Minute, "every Watch stream open", func() bool {
		for _, c := range floods {
			for id := uint32(1); id < c.next; id += 2 {
				if st := c.stream(id); !st.data || st.ended {
					return false
				}
			}
		}
		return true
	})
	other := grpchealth.NewClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC())
	ev := <-other.Watch(ctx, &grpchealth.CheckRequest{})
	if connect.CodeOf(ev.Err) != connect.CodeResourceExhausted || !strings.Contains(ev.Err.Error(), "Watch streams") {
		t.Fatalf("a Watch stream past the server's bound: %+v, want resource_exhausted naming it", ev)
	}
	if res, err := other.Check(ctx, &grpchealth.CheckRequest{}); err != nil || res.Status != grpchealth.StatusServing {
		t.Fatalf("a Check with the Watch streams at their bound: %v, %v", res, err)
	}
	tasks := conveyorv1connect.NewTaskServiceClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC(), servertest.BearerToken("s3cret"))
	enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "q", Type: "t"})
	worker, _, err := openSessionWith(t, s, &conveyorv1.Hello{Queues: map[string]int32{"q": 1}, Concurrency: 4}, connect.WithGRPC(), servertest.BearerToken("s3cret"))
	if err != nil {
		t.Fatalf("a worker session with the Watch streams at their bound: %v", err)
	}
	if d := worker.next(10 * time.Second).GetDispatch(); d == nil {
		t.Fatal("the worker got no Dispatch")
	}

	// Connections that never prove themselves, past their bound: each one
	// past it closes the oldest unproven connection, the Watch floods
	// first; the worker's connection is proven and stays.
	var idle []*rawH2
	for range server.MaxUnprovenConns + 16 {
		idle = append(idle, dialRawH2(t, addr, true))
	}
	all := append(floods, idle...)
	servertest.Eventually(t, time.Minute, "at most MaxUnprovenConns open", func() bool {
		open := 0
		for _, c := range all {
			if !c.isGone() {
				open++
			}
		}
		return open <= server.MaxUnprovenConns
	})
	if !floods[0].isGone() {
		t.Fatal("the oldest unproven connection is still open")
	}
	enqueue(t, tasks, &conveyorv1.EnqueueRequest{Queue: "q", Type: "t"})
	if d := worker.next(10 * time.Second).GetDispatch(); d == nil {
		t.Fatal("the worker got no Dispatch after the connection flood")
	}
	fresh := conveyorv1connect.NewTaskServiceClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC(), servertest.BearerToken("s3cret"))
	enqueue(t, fresh, &conveyorv1.EnqueueRequest{Queue: "other", Type: "t"})
	if _, _, err := openSessionWith(t, s, &conveyorv1.Hello{Queues: map[string]int32{"other": 1}, Concurrency: 1}, connect.WithGRPC(), servertest.BearerToken("s3cret")); err != nil {
		t.Fatalf("a new worker session after the connection flood: %v", err)
	}
}

// TestConnectionWithoutARequestIsClosed: a connection that sends only the
// HTTP/2 preface is closed FirstRequestTimeout after it opened, on a
// server with a token and on one without; a connection that carried a
// request stays open, and serves the next.
func TestConnectionWithoutARequestIsClosed(t *testing.T) {
	t.Parallel()
	for _, token := range []string{"", "s3cret"} {
		t.Run("token="+token, func(t *testing.T) {
			t.Parallel()
			s := servertest.Start(t, server.Config{Token: token})
			used := dialRawH2(t, s.Addr().String(), true)
			first := used.grpcCall(t, checkPath, true)
			silent := dialRawH2(t, s.Addr().String(), true)
			servertest.Eventually(t, 3*server.FirstRequestTimeout, "the preface-only connection closed", silent.isGone)
			if used.isGone() {
				t.Fatal("a connection that carried a request was closed")
			}
			if st := used.stream(first); !st.data || !st.ended {
				t.Fatalf("the first health check: %+v, want answered", st)
			}
			next := used.grpcCall(t, checkPath, true)
			servertest.Eventually(t, 10*time.Second, "the next health check answered", func() bool {
				st := used.stream(next)
				return st.data && st.ended
			})
		})
	}
}

// TestTLSConnectionThatCarriedARequestStays: over TLS too (where the
// server finds the connection under the TLS layer), a connection that
// carried a request outlives FirstRequestTimeout, while one that never
// even completes its handshake is closed.
func TestTLSConnectionThatCarriedARequestStays(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := servertest.SelfSignedCert(t, t.TempDir())
	s := servertest.Start(t, server.Config{TLSCertFile: certFile, TLSKeyFile: keyFile})
	hc := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
	}}
	health := grpchealth.NewClient(hc, s.URL(), connect.WithGRPC())
	if _, err := health.Check(context.Background(), &grpchealth.CheckRequest{}); err != nil {
		t.Fatal(err)
	}
	silent, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = silent.Close() }()
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		_, _ = io.Copy(io.Discard, silent)
	}()
	select {
	case <-gone:
	case <-time.After(3 * server.FirstRequestTimeout):
		t.Fatal("a connection that sent nothing is still open")
	}
	var reused bool
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { reused = info.Reused },
	})
	if _, err := health.Check(ctx, &grpchealth.CheckRequest{}); err != nil {
		t.Fatal(err)
	}
	if !reused {
		t.Fatal("the connection that carried a request was closed")
	}
}

// TestHealthCheckBodyHasADeadline: a health check whose request never
// finishes ends HealthBodyTimeout after it began, rather than holding its
// stream (and a goroutine) for as long as the connection lives.
func TestHealthCheckBodyHasADeadline(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{Token: "s3cret"})
	c := dialRawH2(t, s.Addr().String(), true)
	id := c.grpcCall(t, checkPath, false)
	servertest.Eventually(t, 3*server.HealthBodyTimeout, "the half-sent health check ended", func() bool {
		st := c.stream(id)
		return st.ended && !st.data
	})
}
