package server_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestTLSServesHTTP2 runs every wire format over TLS, where HTTP/2 comes
// from ALPN, and a worker session, which needs HTTP/2.
func TestTLSServesHTTP2(t *testing.T) {
	t.Parallel()
	certFile, keyFile, pool := servertest.SelfSignedCert(t, t.TempDir())
	s := servertest.Start(t, server.Config{TLSCertFile: certFile, TLSKeyFile: keyFile})
	if !strings.HasPrefix(s.URL(), "https://") {
		t.Fatalf("URL %q, want https", s.URL())
	}
	hc := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2: true,
	}}
	for _, p := range servertest.Protocols {
		client := conveyorv1connect.NewTaskServiceClient(hc, s.URL(), p.ClientOption())
		if _, err := client.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t"})); err != nil {
			t.Fatalf("%s over TLS: %v", p, err)
		}
	}
	workers := conveyorv1connect.NewWorkerServiceClient(hc, s.URL(), connect.WithGRPC())
	stream := workers.Session(context.Background())
	defer func() { _ = stream.CloseResponse() }()
	if err := stream.Send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Hello{Hello: &conveyorv1.Hello{
		Queues: map[string]int32{"default": 1}, Concurrency: 1}}}); err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Receive(); err != nil || m.GetWelcome() == nil {
		t.Fatalf("session over TLS: %v, %v", m, err)
	}
	_ = stream.CloseRequest()
}

func TestBadTLSKeyPairFailsAtNew(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bogus := filepath.Join(dir, "bogus.pem")
	if err := os.WriteFile(bogus, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := server.New(server.Config{Listen: "127.0.0.1:0", DataDir: dir, TLSCertFile: bogus, TLSKeyFile: bogus})
	if err == nil || !strings.Contains(err.Error(), "TLS key pair") {
		t.Fatalf("New with a bad key pair: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, server.DataFile)); !os.IsNotExist(err) {
		t.Fatalf("the data file was created before the config was checked: %v", err)
	}
}

// TestRequestSizeBound checks that a request over the bound fails with
// resource_exhausted naming the limit, and that one item with a 1 MiB
// payload (the largest allowed) always fits.
func TestRequestSizeBound(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	client := taskClient(t, s, servertest.GRPC)
	ctx := context.Background()
	if _, err := client.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t", Payload: make([]byte, server.MaxPayloadBytes)})); err != nil {
		t.Fatalf("one 1 MiB payload: %v", err)
	}
	items := make([]*conveyorv1.EnqueueRequest, 33)
	for i := range items {
		items[i] = &conveyorv1.EnqueueRequest{Type: "t", Payload: make([]byte, server.MaxPayloadBytes)}
	}
	_, err := client.EnqueueBatch(ctx, connect.NewRequest(&conveyorv1.EnqueueBatchRequest{Items: items}))
	if connect.CodeOf(err) != connect.CodeResourceExhausted || !strings.Contains(err.Error(), "33554432") {
		t.Fatalf("a 33 MiB batch: %v, want resource_exhausted naming the 32 MiB limit", err)
	}
}

func TestHealthAndReflection(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{Token: "s3cret"})
	// Health answers without a token.
	health := grpchealth.NewClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC())
	for _, svc := range []string{"", conveyorv1connect.TaskServiceName, conveyorv1connect.WorkerServiceName} {
		res, err := health.Check(context.Background(), &grpchealth.CheckRequest{Service: svc})
		if err != nil || res.Status != grpchealth.StatusServing {
			t.Fatalf("health of %q: %v, %v", svc, res, err)
		}
	}
	// Anyone may ask, so a question is at most a service name's size.
	_, err := health.Check(context.Background(), &grpchealth.CheckRequest{Service: strings.Repeat("a", 8<<10)})
	if connect.CodeOf(err) != connect.CodeResourceExhausted {
		t.Fatalf("an 8 KiB health check: %v, want resource_exhausted", connect.CodeOf(err))
	}
	// Reflection lists the services (it needs the token, like every RPC).
	reflect := grpcreflect.NewClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC(), servertest.BearerToken("s3cret"))
	stream := reflect.NewStream(context.Background())
	defer func() { _, _ = stream.Close() }()
	names, err := stream.ListServices()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{conveyorv1connect.TaskServiceName: false, conveyorv1connect.WorkerServiceName: false, conveyorv1connect.AdminServiceName: false}
	for _, n := range names {
		if _, ok := want[string(n)]; ok {
			want[string(n)] = true
		}
	}
	for n, seen := range want {
		if !seen {
			t.Errorf("reflection does not list %s (got %v)", n, names)
		}
	}
	fds, err := stream.FileContainingSymbol(conveyorv1connect.TaskServiceName)
	if err != nil || len(fds) == 0 {
		t.Fatalf("reflection has no descriptor for TaskService: %v", err)
	}
}
