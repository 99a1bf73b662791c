package conveyortest

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
)

// stopTimeout bounds the server's stop at cleanup: long enough for its
// sessions to end, short enough that a stuck test still ends.
const stopTimeout = 30 * time.Second

// Server is a real Conveyor server running in the test's process, on a
// loopback port and a bbolt file in a temporary directory. Make one with
// Start; it stops when the test ends.
type Server struct {
	t     testing.TB
	srv   *server.Server
	token string
	// admin lists queues and tasks for the assertions; client reads the
	// tasks they return. Both carry the server's token.
	admin  conveyorv1connect.AdminServiceClient
	client *conveyor.Client
}

// Option configures the server Start starts.
type Option interface {
	apply(*server.Config)
}

type optionFunc func(*server.Config)

func (f optionFunc) apply(c *server.Config) { f(c) }

// WithConfig lets fn edit the server's configuration before it starts,
// for the settings a test needs: a Token (the Server's clients and
// workers then send it), a short LeaseTTL, a Backoff that retries at once.
// Start has filled in Listen (a free loopback port), DataDir (a new
// t.TempDir()) and Logger (discarding) by then; fn may replace them.
// Start refuses TLS (TLSCertFile, TLSKeyFile): the Server's clients speak
// plaintext HTTP/2.
func WithConfig(fn func(*server.Config)) Option {
	return optionFunc(func(c *server.Config) {
		if fn != nil {
			fn(c)
		}
	})
}

// Start starts a Conveyor server for t, on 127.0.0.1 with a free port and
// the embedded bbolt engine on a file in t.TempDir(), and stops it when t
// ends (t.Cleanup). It fails t if the server cannot start. Each call is a
// server of its own, with no task and no queue: tests that use one each
// may run in parallel.
//
// The Server's methods report their failures to this t.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	cfg := server.Config{
		Listen:  "127.0.0.1:0",
		DataDir: t.TempDir(),
		Logger:  slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if cfg.TLSCertFile != "" || cfg.TLSKeyFile != "" {
		t.Fatalf("conveyortest: Start does not serve TLS: its clients speak plaintext HTTP/2 (h2c); leave TLSCertFile and TLSKeyFile empty")
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("conveyortest: server.New: %v", err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatalf("conveyortest: start the server: %v", err)
	}
	s := &Server{t: t, srv: srv, token: cfg.Token}
	hc := conveyor.H2CClient()
	// Cleanups run last first: the server stops, then the admin client's
	// connections close.
	t.Cleanup(hc.CloseIdleConnections)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		if err := srv.Stop(ctx); err != nil {
			t.Errorf("conveyortest: stop the server: %v", err)
		}
	})
	s.admin = conveyorv1connect.NewAdminServiceClient(hc, srv.URL(), connect.WithGRPC(),
		connect.WithInterceptors(conveyor.TokenInterceptor(cfg.Token)))
	s.client = s.Client(conveyor.WithEnqueueBatching(false))
	return s
}

// URL is the server's address, such as "http://127.0.0.1:41234", for
// conveyor.NewClient and NewWorker.
func (s *Server) URL() string { return s.srv.URL() }

// Client returns a conveyor.Client of the server, with its token if it has
// one; opts come after, so they may override it.
func (s *Server) Client(opts ...conveyor.Option) *conveyor.Client {
	s.t.Helper()
	c, err := conveyor.NewClient(s.URL(), append(s.connOptions(), opts...)...)
	if err != nil {
		s.t.Fatalf("conveyortest: NewClient: %v", err)
	}
	return c
}

// NewWorker returns a conveyor.Worker of the server, with its token if it
// has one and a short reconnect backoff (so that a test does not wait out
// the default's); opts come after, so they may override either. Register
// handlers and Run it, or hand it to DrainOnce. It is closed when the test
// ends (Worker.Close, which does nothing to a Worker already stopped), so
// that a test need not stop it itself.
func (s *Server) NewWorker(opts ...conveyor.WorkerOption) *conveyor.Worker {
	s.t.Helper()
	all := []conveyor.WorkerOption{conveyor.WithReconnectBackoff(10*time.Millisecond, 100*time.Millisecond)}
	for _, o := range s.connOptions() {
		all = append(all, o)
	}
	w, err := conveyor.NewWorker(s.URL(), append(all, opts...)...)
	if err != nil {
		s.t.Fatalf("conveyortest: NewWorker: %v", err)
	}
	s.t.Cleanup(func() { _ = w.Close() })
	return w
}

// connOptions are the connection options every client of s needs.
func (s *Server) connOptions() []conveyor.Option {
	if s.token == "" {
		return nil
	}
	return []conveyor.Option{conveyor.WithToken(s.token)}
}
