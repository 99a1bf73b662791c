// Package servertest starts a real Conveyor server for tests: a bbolt file
// in t.TempDir() (or, with CONVEYOR_TEST_BROKER=postgres, a schema of the
// database CONVEYOR_TEST_DATABASE_URL names), a loopback listener on a
// free port, h2c, and clients in each wire format.
package servertest

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/internal/pgtest"
	"github.com/conveyor-dev/conveyor/internal/testwait"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
)

// Protocol names a ConnectRPC wire format.
type Protocol string

// The three wire formats a client can speak.
const (
	GRPC    Protocol = "grpc"
	GRPCWeb Protocol = "grpcweb"
	Connect Protocol = "connect"
)

// Protocols lists every wire format, for table tests.
var Protocols = []Protocol{GRPC, GRPCWeb, Connect}

// ClientOption is the connect client option that selects p.
func (p Protocol) ClientOption() connect.ClientOption {
	switch p {
	case GRPC:
		return connect.WithGRPC()
	case GRPCWeb:
		return connect.WithGRPCWeb()
	}
	return connect.WithProtoJSON()
}

// The engines a test server can run on.
const (
	EngineBolt     = "bolt"
	EnginePostgres = "postgres"
)

// EnvEngine selects the engine of the test servers: bolt (the default) or
// postgres. `make test` runs the server-level tests on each.
const EnvEngine = "CONVEYOR_TEST_BROKER"

// Engine is the engine test servers run on, as EnvEngine says.
func Engine() string {
	if os.Getenv(EnvEngine) == EnginePostgres {
		return EnginePostgres
	}
	return EngineBolt
}

// Server is a running test server.
type Server struct {
	*server.Server
	Config server.Config
}

// Start starts a server with cfg (Listen, DataDir and Logger are filled in
// when empty) and stops it at cleanup.
func Start(t testing.TB, cfg server.Config) *Server {
	t.Helper()
	if cfg.Listen == "" {
		cfg.Listen = "127.0.0.1:0"
	}
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	if cfg.OpenBroker == nil && Engine() == EnginePostgres {
		cfg.OpenBroker = server.OpenPostgres(pgtest.URL(t), pgtest.Schema(t, cfg.DataDir), 0)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		if testing.Verbose() {
			cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	}
	s, err := server.New(cfg)
	if err != nil {
		t.Fatalf("server.New: %v", err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatalf("server.Start: %v", err)
	}
	ts := &Server{Server: s, Config: cfg}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Stop(ctx); err != nil {
			t.Errorf("server.Stop: %v", err)
		}
	})
	return ts
}

// StartBolt starts a server on the embedded bbolt engine whatever
// EnvEngine says, for a test of what only that engine has (its file, its
// limits, its online backup).
func StartBolt(t testing.TB, cfg server.Config) *Server {
	t.Helper()
	if cfg.DataDir == "" {
		cfg.DataDir = t.TempDir()
	}
	cfg.OpenBroker = server.OpenBolt(filepath.Join(cfg.DataDir, server.DataFile))
	return Start(t, cfg)
}

// Restart stops s and starts a new server on the same address and data
// directory, as an operator restarting the process would; tasks persist
// and leased ones are redelivered. The new server is stopped at cleanup.
func Restart(t testing.TB, s *Server) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("server.Stop: %v", err)
	}
	cfg := s.Config
	cfg.Listen = s.Addr().String()
	return Start(t, cfg)
}

// HTTPClient returns an HTTP client that speaks HTTP/2 without TLS (h2c,
// prior knowledge) to the test server, as gRPC and session streams need.
func HTTPClient() *http.Client {
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{
		Protocols:   protocols,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSClientConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
		},
	}}
}

// HTTP1Client returns a plain HTTP/1.1 client, for Connect unary calls.
func HTTP1Client() *http.Client {
	return &http.Client{Transport: &http.Transport{}}
}

// BearerToken is a client option that sends token on every call.
func BearerToken(token string) connect.ClientOption {
	return connect.WithInterceptors(conveyor.TokenInterceptor(token))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// Eventually polls cond every few milliseconds until it holds, failing the
// test if it does not within timeout.
func Eventually(t testing.TB, timeout time.Duration, msg string, cond func() bool) {
	t.Helper()
	testwait.Until(t, timeout, msg, cond)
}
