// Package server composes Conveyor: the broker, the timer loops, the lease
// reaper, the worker-session hub (server/sessions) and the three
// ConnectRPC services, served on one port (h2c or TLS) next to gRPC health
// checking and reflection. The broker's signals come in through one
// notifier (notifier.go), which forwards those about worker sessions to
// the hub, each to its one method.
//
// # Shutdown order
//
// Stop runs these steps once, in this order:
//  1. Health reports NOT_SERVING, so load balancers stop routing here.
//     Each health Watch stream is sent that status and ends (one still
//     open a second later is cut). Enqueues waiting for room in a full
//     queue stop waiting (refused).
//  2. Worker sessions end: each stream is closed and its leases released
//     for immediate redelivery, with no retry increment. A stream that has
//     not sent its Hello yet ends too, with unavailable, and so do gRPC
//     reflection streams.
//  3. The HTTP server stops accepting and waits for in-flight RPCs. No
//     stream is left to wait for: the only long-lived ones ended above.
//  4. The timer loops (promoter, purger, lease reaper, cron) stop.
//  5. The broker flushes its last group commit and closes the file.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"connectrpc.com/connect"
	"connectrpc.com/grpcreflect"

	"github.com/conveyor-dev/conveyor/admin"
	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/internal/browserguard"
	"github.com/conveyor-dev/conveyor/lease"
	"github.com/conveyor-dev/conveyor/scheduler"
	"github.com/conveyor-dev/conveyor/server/push"
	"github.com/conveyor-dev/conveyor/server/sessions"
)

// Server is a running Conveyor server.
type Server struct {
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	started time.Time

	broker broker.Broker
	rooms  *roomWaits
	hub    *sessions.Hub
	push   *push.Pool
	// pushKeys sign the requests to push endpoints (Config.PushSecrets).
	pushKeys [][]byte
	metrics  *metrics
	loops    []service // timer loops, in start order
	health   *health
	storage  *storageWatch // nil for an engine that reports no storage health
	gate     *tokenGate    // nil without a token
	conns    *connGuard
	httpSrv  *http.Server
	// endStreams ends the reflection streams (endAtShutdown).
	endStreams context.CancelFunc

	listener net.Listener
	serveErr chan error

	stopOnce sync.Once
	stopErr  error
}

// service is the one lifecycle of the server's background roles (the
// session hub, the timer loops): Start returns once running, Stop is
// idempotent and bounded by its context.
type service interface {
	Start(ctx context.Context) error
	Stop(ctx context.Context) error
}

// New validates cfg and returns a server that is not started yet.
func New(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	keys, err := cfg.pushKeys()
	if err != nil {
		return nil, err
	}
	if cfg.Version == "" {
		cfg.Version = Version
	}
	return &Server{cfg: cfg, log: cfg.Logger, now: time.Now, pushKeys: keys}, nil
}

// Start opens the store, starts the background services and begins
// serving. It returns once the listener is bound; serving continues until
// Stop.
func (s *Server) Start(ctx context.Context) error {
	s.started = s.now()
	signals := &notifier{}
	s.metrics = newMetrics()
	// The address is bound first, so that the node is known to the others
	// by the one it serves on.
	if err := s.listen(); err != nil {
		return err
	}
	advertise := s.cfg.AdvertiseAddress
	if advertise == "" {
		advertise = s.listener.Addr().String()
	}
	b, err := s.cfg.OpenBroker(BrokerOptions{Notifier: signals, Logger: s.log.With("component", "broker"),
		GroupDefaults: s.cfg.GroupPolicy, OnCommit: s.metrics.committed,
		NodeAddress: advertise, NodeVersion: s.cfg.Version, NodeLiveness: s.cfg.NodeLiveness})
	if err != nil {
		_ = s.listener.Close()
		return fmt.Errorf("open store: %w", err)
	}
	s.broker = b
	s.rooms = &signals.rooms
	s.metrics.cronExists = func(id string) bool {
		_, err := b.Cron(context.Background(), id)
		return !errors.Is(err, broker.ErrNotFound)
	}
	retrier := scheduler.Retrier{Backoff: s.cfg.Backoff}
	retention := scheduler.Retention{Completed: s.cfg.Retention, Archived: s.cfg.ArchiveRetention}
	s.hub = sessions.NewHub(b, s.cfg.sessionConfig(), retrier, sessionMetrics{s.metrics}, s.log, s.now)
	s.metrics.registry.MustRegister(newStateCollector(s))
	promoter := scheduler.NewPromoter(b, s.now, s.log)
	purger := scheduler.NewPurger(b, retention, 0, s.now, s.log)
	reaper := lease.NewReaper(b, retrier, s.now, s.log)
	cron := scheduler.NewCronLoop(scheduler.NewCron(b, cronTask, s.metrics.cronFired, s.log), s.now, s.log)
	s.loops = []service{promoter, purger, reaper, cron}
	gated := []*scheduler.Loop{purger, cron}
	if h, ok := b.(broker.HistoryKeeper); ok {
		history := scheduler.NewHistoryRecorder(b, h, s.now, s.log)
		s.loops = append(s.loops, history)
		gated = append(gated, history)
	}
	s.push = s.newPushPool(b, retrier)
	s.hub.SetExtraSessions(s.pushRegistryInfos)
	signals.set(s.hub, s.push, []*scheduler.Loop{promoter, purger, reaper}, cron)
	if c, ok := b.(broker.Clustered); ok {
		s.loops = append(s.loops, newLeaderGate(c, promoter, gated...))
	}
	for _, svc := range append([]service{s.hub, s.push}, s.loops...) {
		if err := svc.Start(ctx); err != nil {
			_ = s.closeBackground(context.Background())
			_ = s.listener.Close()
			return err
		}
	}
	s.httpSrv = s.newHTTPServer(s.routes(b))
	if sh, ok := b.(broker.StorageHealth); ok {
		s.storage = newStorageWatch(sh, s.health, s.log.With("component", "storage"))
		_ = s.storage.Start(ctx)
	}
	s.serveErr = make(chan error, 1)
	go func() {
		var err error
		if s.cfg.TLSCertFile != "" {
			err = s.httpSrv.ServeTLS(s.listener, s.cfg.TLSCertFile, s.cfg.TLSKeyFile)
		} else {
			err = s.httpSrv.Serve(s.listener)
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.serveErr <- err
	}()
	info, _ := b.Info(ctx)
	s.log.Info("conveyor serving", "addr", s.URL(), "version", s.cfg.Version,
		"engine", info.Engine, "data", info.DataPath, "auth", s.cfg.Token != "", "tls", s.cfg.TLSCertFile != "")
	return nil
}

func (s *Server) listen() error {
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.cfg.Listen, err)
	}
	s.conns = &connGuard{requireProof: s.cfg.Token != ""}
	s.listener = listener{Listener: ln, guard: s.conns}
	return nil
}

// Stats are counters of a running server, for monitoring.
type Stats struct {
	// Sessions is the number of live worker sessions.
	Sessions int `json:"sessions"`
	// LateResults counts Results dropped because their lease had lapsed or
	// been reassigned: the reaper had already taken the task back.
	LateResults int64 `json:"late_results"`
	// UnknownResults counts Results for tasks the session does not hold
	// (never held, or already answered).
	UnknownResults int64 `json:"unknown_results"`
	// Commits and CommitOps count group commits and the changes they
	// carried; their ratio is how much group commit merges.
	Commits   int64 `json:"commits"`
	CommitOps int64 `json:"commit_ops"`
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	st := Stats{}
	if s.hub != nil {
		st.Sessions = s.hub.Count()
		st.LateResults = s.hub.LateResults()
		st.UnknownResults = s.hub.UnknownResults()
	}
	if cs, ok := s.broker.(broker.CommitStatser); ok {
		st.Commits, st.CommitOps = cs.CommitStats()
	}
	return st
}

// Addr is the address the server listens on.
func (s *Server) Addr() net.Addr { return s.listener.Addr() }

// URL is the base URL clients use: http:// for h2c, https:// with TLS.
func (s *Server) URL() string {
	scheme := "http"
	if s.cfg.TLSCertFile != "" {
		scheme = "https"
	}
	return scheme + "://" + s.listener.Addr().String()
}

// Wait blocks until the HTTP server stops and returns its error.
func (s *Server) Wait() error { return <-s.serveErr }

// Stop shuts the server down gracefully (see the package doc for the
// order). It is idempotent and safe to call concurrently.
func (s *Server) Stop(ctx context.Context) error {
	s.stopOnce.Do(func() { s.stopErr = s.stop(ctx) })
	return s.stopErr
}

func (s *Server) stop(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.ShutdownTimeout)
		defer cancel()
	}
	if s.rooms != nil {
		// Producers waiting for room would hold the HTTP shutdown up to
		// their wait: the workers that would make room are leaving.
		s.rooms.close()
	}
	if s.storage != nil {
		_ = s.storage.Stop(ctx)
	}
	if s.health != nil {
		s.health.end()
	}
	var errs []error
	if s.hub != nil {
		if err := s.hub.Stop(ctx); err != nil {
			errs = append(errs, fmt.Errorf("end worker sessions: %w", err))
		}
	}
	if s.push != nil {
		_ = s.push.Stop(ctx)
	}
	if s.endStreams != nil {
		s.endStreams()
	}
	if s.httpSrv != nil {
		if err := s.httpSrv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
			_ = s.httpSrv.Close()
		}
	}
	if s.health != nil {
		s.health.close()
	}
	st := s.Stats()
	// The loops and the store are stopped even when ctx ran out while the
	// HTTP server drained: with ctx spent, each Stop would return at once
	// with its error, and the store would close under loops still running.
	// They get a budget of their own instead.
	bg := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		bg, cancel = context.WithTimeout(context.WithoutCancel(ctx), backgroundStopTimeout)
		defer cancel()
	}
	if err := s.closeBackground(bg); err != nil {
		errs = append(errs, err)
	}
	s.log.Info("conveyor stopped", "late_results", st.LateResults, "unknown_results", st.UnknownResults)
	return errors.Join(errs...)
}

// backgroundStopTimeout bounds stopping the timer loops and the hub when
// the shutdown's own deadline has already passed (see stop).
const backgroundStopTimeout = 5 * time.Second

// closeBackground stops the timer loops (last started, first stopped) and
// the session hub, then closes the broker.
func (s *Server) closeBackground(ctx context.Context) error {
	var errs []error
	for i := len(s.loops) - 1; i >= 0; i-- {
		if err := s.loops[i].Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if s.hub != nil {
		if err := s.hub.Stop(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if s.push != nil {
		_ = s.push.Stop(ctx)
	}
	if s.broker != nil {
		if err := s.broker.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close store: %w", err))
		}
	}
	return errors.Join(errs...)
}

// servedServices are the services health checking and reflection report.
var servedServices = []string{
	conveyorv1connect.TaskServiceName,
	conveyorv1connect.WorkerServiceName,
	conveyorv1connect.AdminServiceName,
}

// routes mounts every service, the dashboard and the browser guard on one
// handler.
func (s *Server) routes(b broker.Broker) http.Handler {
	s.gate = newTokenGate(s.cfg.Token)
	opts := append([]connect.HandlerOption{connect.WithReadMaxBytes(MaxRequestBytes), connect.WithCompressMinBytes(compressMinBytes),
		connect.WithInterceptors(boundErrors{})}, jsonCodecs...)
	mux := http.NewServeMux()
	rpc := func(path string, h http.Handler) { mux.Handle(path, s.gate.rpc(h)) }
	// The unary services' requests must arrive within RequestBodyTimeout;
	// the session's stream is long-lived by design.
	unary := func(path string, h http.Handler) { rpc(path, bodyTimeout(RequestBodyTimeout, h)) }
	unary(conveyorv1connect.NewTaskServiceHandler(&taskService{broker: b, log: s.log, now: s.now, hub: s.hub, metrics: s.metrics, rooms: s.rooms}, opts...))
	workerPath, workerHandler := conveyorv1connect.NewWorkerServiceHandler(&workerService{hub: s.hub}, slices.Concat(opts, workerCodecs)...)
	rpc(workerPath, sessions.WithFlushGate(workerHandler))
	unary(conveyorv1connect.NewAdminServiceHandler(&adminService{broker: b, server: s}, opts...))
	reflector := grpcreflect.NewStaticReflector(servedServices...)
	streamsDone, endStreams := context.WithCancel(context.Background())
	s.endStreams = endStreams
	reflection := func(path string, h http.Handler) { rpc(path, endAtShutdown(streamsDone, h)) }
	reflection(grpcreflect.NewHandlerV1(reflector, opts...))
	reflection(grpcreflect.NewHandlerV1Alpha(reflector, opts...))

	// Health needs no token, and bounds what anyone may hold (health.go).
	s.health = newHealth(servedServices...)
	mux.Handle(s.health.handler())

	// The dashboard. It calls AdminService with the token the user gives
	// it, like any other client, so its files need none.
	mux.Handle("GET /ui/", admin.Handler("/ui/"))
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	mux.Handle("GET "+BackupPath, s.backupHandler())
	mux.Handle("GET "+MetricsPath, s.metricsHandler())

	if s.cfg.Token != "" {
		return s.conns.trackRequests(mux)
	}
	host, _, _ := net.SplitHostPort(s.cfg.Listen)
	return s.conns.trackRequests(browserguard.Handler(mux, s.cfg.TLSCertFile != "", isLoopback(host)))
}

// newHTTPServer serves HTTP/1.1 and HTTP/2: cleartext HTTP/2 (h2c, prior
// knowledge) when plaintext, HTTP/2 via ALPN with TLS.
func (s *Server) newHTTPServer(h http.Handler) *http.Server {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	if s.cfg.TLSCertFile != "" {
		protocols.SetHTTP2(true)
	} else {
		protocols.SetUnencryptedHTTP2(true)
	}
	return &http.Server{
		Handler:           h,
		Protocols:         protocols,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       5 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ConnContext:       connContext,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		HTTP2: &http.HTTP2Config{
			MaxConcurrentStreams: 1000,
			// Generous flow-control windows so that a 1 MiB payload, or a
			// large EnqueueBatch, streams in without waiting for window
			// updates.
			MaxReceiveBufferPerConnection: 16 << 20,
			MaxReceiveBufferPerStream:     4 << 20,
		},
	}
}
