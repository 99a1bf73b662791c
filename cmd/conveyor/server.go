package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/postgres"
	"github.com/conveyor-dev/conveyor/lease"
	"github.com/conveyor-dev/conveyor/scheduler"
	"github.com/conveyor-dev/conveyor/server"
)

// serverCmd's defaults are the exported constants of the packages that own
// each rule (serverDefaults below), so a default is written in one place.
type serverCmd struct {
	Listen           string        `default:"${listen}" env:"CONVEYOR_LISTEN" help:"Address to serve on."`
	Broker           string        `default:"bolt" enum:"bolt,postgres" env:"CONVEYOR_BROKER" help:"Storage engine: bolt, the embedded file in --data-dir; or postgres, the database --database-url names."`
	DatabaseURL      string        `name:"database-url" env:"CONVEYOR_DATABASE_URL" help:"PostgreSQL URL (postgres://user:password@host:port/db), for --broker postgres."`
	DatabaseMaxConns int32         `name:"database-max-conns" default:"8" env:"CONVEYOR_DATABASE_MAX_CONNS" help:"Most connections to the database the server holds open, for --broker postgres."`
	NodeLiveness     time.Duration `name:"node-liveness" default:"${node_liveness}" env:"CONVEYOR_NODE_LIVENESS" help:"How long a node's heartbeat may lapse before the other nodes on the database declare it dead and release its tasks, for --broker postgres (at least 1s)."`
	AdvertiseAddress string        `name:"advertise-address" env:"CONVEYOR_ADVERTISE_ADDRESS" help:"host:port the other nodes and operators reach this node at, shown in GetClusterInfo, for --broker postgres (default: the address --listen bound)."`
	DataDir          string        `default:"${data_dir}" env:"CONVEYOR_DATA_DIR" help:"Directory of the data file."`
	Token            string        `env:"CONVEYOR_TOKEN" help:"Bearer token every RPC must carry (empty: no authentication, loopback only)."`
	TokenFile        string        `env:"CONVEYOR_TOKEN_FILE" help:"Read the bearer token from this file."`
	AllowRemote      bool          `env:"CONVEYOR_ALLOW_REMOTE" help:"Allow a non-loopback --listen without a token."`
	TLSCert          string        `name:"tls-cert" env:"CONVEYOR_TLS_CERT" help:"TLS certificate file (enables TLS)."`
	TLSKey           string        `name:"tls-key" env:"CONVEYOR_TLS_KEY" help:"TLS private key file."`
	LeaseTTL         time.Duration `name:"lease-ttl" default:"${lease_ttl}" env:"CONVEYOR_LEASE_TTL" help:"Lease lifetime of a dispatched task without a heartbeat."`
	LimitGrace       time.Duration `default:"${limit_grace}" env:"CONVEYOR_LIMIT_GRACE" help:"How long past its deadline or timeout an attempt may keep its lease."`
	Retention        time.Duration `default:"${retention}" env:"CONVEYOR_RETENTION" help:"How long completed tasks are kept when the task does not say."`
	ArchiveRetention time.Duration `default:"${archive_retention}" env:"CONVEYOR_ARCHIVE_RETENTION" help:"How long archived and canceled tasks are kept."`
	ShutdownTimeout  time.Duration `default:"${shutdown_timeout}" env:"CONVEYOR_SHUTDOWN_TIMEOUT" help:"How long shutdown waits for in-flight RPCs."`
	LogFormat        string        `default:"text" enum:"text,json" env:"CONVEYOR_LOG_FORMAT" help:"Log format: text or json."`
	LogLevel         string        `default:"info" enum:"debug,info,warn,error" env:"CONVEYOR_LOG_LEVEL" help:"Log level."`
	DebugAddr        string        `env:"CONVEYOR_DEBUG_ADDR" help:"Serve Go's pprof profiles (/debug/pprof/) and the server's counters (/debug/vars) on this address (e.g. 127.0.0.1:6060); off when empty."`

	MaxSessionConcurrency int           `default:"${max_session_concurrency}" env:"CONVEYOR_MAX_SESSION_CONCURRENCY" help:"Most tasks one worker session is sent at once; a session declaring more concurrency is admitted and throttled to this."`
	MaxSessionBytes       int64         `default:"${max_session_bytes}" env:"CONVEYOR_MAX_SESSION_BYTES" help:"Task bytes (payloads and metadata) one worker session may hold unanswered."`
	ReclaimWindow         time.Duration `default:"${reclaim_window}" env:"CONVEYOR_RECLAIM_WINDOW" help:"How long a lapsed task keeps its worker's slot while the worker still owes its result."`

	PushSecret []string `name:"push-secret" sep:"," env:"CONVEYOR_PUSH_SECRET" placeholder:"whsec_..." help:"Secret that signs the requests to push endpoints, written whsec_ and the base64 of 24 to 64 random bytes; repeat to rotate (every secret signs). Without one, push URLs must be loopback."`

	GroupMaxSize     int32         `default:"${group_max_size}" env:"CONVEYOR_GROUP_MAX_SIZE" help:"An aggregation group fires once it holds this many tasks (queues may set their own)."`
	GroupMaxDelay    time.Duration `default:"${group_max_delay}" env:"CONVEYOR_GROUP_MAX_DELAY" help:"An aggregation group fires this long after its first task."`
	GroupGracePeriod time.Duration `default:"${group_grace_period}" env:"CONVEYOR_GROUP_GRACE_PERIOD" help:"An aggregation group fires this long after its latest task."`
}

// openBroker is how the server opens the engine the flags name: the
// embedded file (OpenBroker nil: the server's default) or PostgreSQL.
func (c *serverCmd) openBroker() (func(server.BrokerOptions) (broker.Broker, error), error) {
	switch {
	case c.Broker == "postgres" && c.DatabaseURL == "":
		return nil, errors.New("--broker postgres needs --database-url (or CONVEYOR_DATABASE_URL): " +
			"postgres://user:password@host:port/database")
	case c.Broker == "postgres":
		if c.NodeLiveness < time.Second {
			return nil, fmt.Errorf("--node-liveness must be at least 1s, got %s", c.NodeLiveness)
		}
		if c.DatabaseMaxConns < 1 {
			return nil, fmt.Errorf("--database-max-conns must be at least 1, got %d", c.DatabaseMaxConns)
		}
		return server.OpenPostgres(c.DatabaseURL, "", c.DatabaseMaxConns), nil
	case c.AdvertiseAddress != "":
		return nil, errors.New("--advertise-address applies to --broker postgres only: an embedded engine serves one node")
	case c.DatabaseURL != "":
		return nil, errors.New("--database-url applies to --broker postgres only; --broker bolt keeps its data in --data-dir")
	}
	return nil, nil
}

// serverDefaults fills the ${...} defaults of serverCmd's flags.
func serverDefaults() kong.Vars {
	return kong.Vars{
		"listen":                  server.DefaultListen,
		"node_liveness":           postgres.DefaultLiveness.String(),
		"data_dir":                server.DefaultDataDir,
		"lease_ttl":               lease.DefaultTTL.String(),
		"limit_grace":             lease.DefaultLimitGrace.String(),
		"retention":               scheduler.DefaultRetention.String(),
		"archive_retention":       scheduler.DefaultArchiveRetention.String(),
		"shutdown_timeout":        server.DefaultShutdownTimeout.String(),
		"max_session_concurrency": strconv.Itoa(server.DefaultMaxSessionConcurrency),
		"max_session_bytes":       strconv.Itoa(server.DefaultMaxSessionBytes),
		"reclaim_window":          server.DefaultReclaimWindow.String(),
		"group_max_size":          strconv.Itoa(scheduler.DefaultGroupMaxSize),
		"group_max_delay":         scheduler.DefaultGroupMaxDelay.String(),
		"group_grace_period":      scheduler.DefaultGroupGracePeriod.String(),
	}
}

func (c *serverCmd) Run() error {
	openBroker, err := c.openBroker()
	if err != nil {
		return err
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--lease-ttl", c.LeaseTTL}, {"--limit-grace", c.LimitGrace}, {"--retention", c.Retention}, {"--archive-retention", c.ArchiveRetention}, {"--shutdown-timeout", c.ShutdownTimeout}} {
		if d.v <= 0 {
			return fmt.Errorf("%s must be positive, got %s", d.flag, d.v)
		}
	}
	tuneGC()
	log := newLogger(c.LogFormat, c.LogLevel)
	token := c.Token
	if c.TokenFile != "" {
		if token != "" {
			return errors.New("--token and --token-file are mutually exclusive")
		}
		b, err := os.ReadFile(c.TokenFile)
		if err != nil {
			return fmt.Errorf("read --token-file: %w", err)
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			return fmt.Errorf("--token-file %s is empty", c.TokenFile)
		}
	}
	srv, err := server.New(server.Config{
		Listen: c.Listen, DataDir: c.DataDir, Token: token, AllowRemote: c.AllowRemote,
		AdvertiseAddress: c.AdvertiseAddress, NodeLiveness: c.NodeLiveness,
		TLSCertFile: c.TLSCert, TLSKeyFile: c.TLSKey, LeaseTTL: c.LeaseTTL, LimitGrace: c.LimitGrace,
		Retention: c.Retention, ArchiveRetention: c.ArchiveRetention,
		ShutdownTimeout: c.ShutdownTimeout, Logger: log,
		MaxSessionConcurrency: c.MaxSessionConcurrency, MaxSessionBytes: c.MaxSessionBytes,
		ReclaimWindow: c.ReclaimWindow,
		GroupPolicy:   broker.GroupPolicy{MaxSize: c.GroupMaxSize, MaxDelay: c.GroupMaxDelay, GracePeriod: c.GroupGracePeriod},
		OpenBroker:    openBroker,
		PushSecrets:   c.PushSecret,
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := srv.Start(ctx); err != nil {
		return err
	}
	if c.DebugAddr != "" {
		if _, err := serveDebug(c.DebugAddr, srv, token, log); err != nil {
			_ = srv.Stop(context.Background())
			return err
		}
	}
	// The one line scripts and tests wait for.
	fmt.Printf("conveyor serving on %s\n", srv.URL())
	select {
	case <-ctx.Done():
		log.Info("shutting down", "signal", context.Cause(ctx))
	case err := <-waitErr(srv):
		if err != nil {
			return err
		}
	}
	stop()
	return srv.Stop(context.Background())
}

func waitErr(srv *server.Server) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- srv.Wait() }()
	return ch
}

func newLogger(format, level string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(os.Stderr, opts))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, opts))
}
