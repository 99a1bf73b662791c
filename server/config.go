package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/lease"
	"github.com/conveyor-dev/conveyor/scheduler"
	"github.com/conveyor-dev/conveyor/server/push"
	"github.com/conveyor-dev/conveyor/server/sessions"
)

// Config configures a Server. The zero value of each field means its
// documented default.
type Config struct {
	// Listen is the TCP address to serve on. Defaults to "127.0.0.1:7420".
	Listen string
	// AdvertiseAddress is where the other nodes and operators reach this
	// one (GetClusterInfo), for an engine several nodes share. Defaults to
	// the address Listen bound.
	AdvertiseAddress string
	// NodeLiveness is how long a node's heartbeat may lapse before the
	// other nodes declare it dead and release the tasks it held, for an
	// engine several nodes share. Defaults to the engine's (15 s).
	NodeLiveness time.Duration
	// DataDir holds the bbolt file (conveyor.db). Defaults to "./conveyor-data".
	DataDir string
	// Token is the bearer token every RPC must carry. Empty disables
	// authentication, which is allowed only on a loopback address unless
	// AllowRemote is set.
	Token string
	// AllowRemote permits a non-loopback Listen address without a token.
	AllowRemote bool
	// TLSCertFile and TLSKeyFile enable TLS (HTTP/2 via ALPN). Both or neither.
	TLSCertFile, TLSKeyFile string
	// LeaseTTL is how long a dispatched task's lease lives without a
	// heartbeat. Defaults to lease.DefaultTTL (60s). Workers are told to
	// heartbeat every LeaseTTL/3.
	LeaseTTL time.Duration
	// LimitGrace is how long past its deadline or timeout an attempt may
	// keep its lease. Defaults to lease.DefaultLimitGrace (5s).
	LimitGrace time.Duration
	// Retention is how long COMPLETED tasks are kept when the task does not
	// say. Defaults to scheduler.DefaultRetention (24h).
	Retention time.Duration
	// ArchiveRetention is how long ARCHIVED and CANCELED tasks are kept.
	// Defaults to scheduler.DefaultArchiveRetention (7 days).
	ArchiveRetention time.Duration
	// Backoff computes retry delays. Defaults to scheduler.Backoff.
	Backoff scheduler.BackoffFunc
	// GroupPolicy is the aggregation-group policy of queues that do not set
	// their own (a zero field takes scheduler.DefaultGroupPolicy's).
	GroupPolicy broker.GroupPolicy
	// OpenBroker opens the storage engine, handing it the server's
	// Notifier. Defaults to the embedded bbolt engine on a file in DataDir
	// (OpenBolt).
	OpenBroker func(BrokerOptions) (broker.Broker, error)
	// ShutdownTimeout bounds how long Stop waits for in-flight RPCs when its
	// context has no deadline. Defaults to 30s.
	ShutdownTimeout time.Duration
	// BackupStallTimeout bounds how long an online backup waits for its
	// client to take the next bytes: a backup holds a read transaction,
	// which keeps the file's freed pages from reuse (and, once the file
	// must be remapped to grow, holds up every commit), so a stalled client
	// must not hold it for long. Defaults to DefaultBackupStallTimeout.
	BackupStallTimeout time.Duration
	// Logger receives the server's structured logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Version is reported to clients. Defaults to Version.
	Version string
	// MaxSessionConcurrency bounds how many deliveries one session is sent
	// at once. A session that declares a larger Hello.concurrency is
	// admitted and sent at most this many (the protocol bounds concurrency
	// only from below, and lets a server send fewer than a worker can run);
	// the server logs it when the session opens. A Credit's n is still
	// checked against the declared concurrency. Defaults to
	// DefaultMaxSessionConcurrency.
	MaxSessionConcurrency int
	// MaxSessionBytes bounds the task bytes (payloads and metadata) one
	// session may hold unanswered; dispatch to it waits below its
	// concurrency once they reach it. Defaults to DefaultMaxSessionBytes.
	MaxSessionBytes int64
	// ReclaimWindow is how long a lapsed delivery keeps its session's
	// concurrency slot while the worker still owes its Result (it is told
	// to cancel the task, and answers when the handler unwinds). Defaults
	// to DefaultReclaimWindow.
	ReclaimWindow time.Duration
	// PushSecrets sign the requests to push endpoints (docs/push.md), each
	// written "whsec_" and the base64 of its key: every one signs, so an
	// endpoint that knows any of them verifies (a key rotates by adding the
	// new one first). With none, requests are unsigned and only loopback
	// push URLs are accepted.
	PushSecrets []string
}

// sessionConfig is the session settings of c, for the session hub.
func (c *Config) sessionConfig() sessions.Config {
	return sessions.Config{LeaseTTL: c.LeaseTTL, LimitGrace: c.LimitGrace, MaxSessionConcurrency: c.MaxSessionConcurrency,
		MaxSessionBytes: c.MaxSessionBytes, ReclaimWindow: c.ReclaimWindow, Version: c.Version, MinSDKVersion: MinSDKVersion}
}

// MaxLeaseTTL bounds Config.LeaseTTL: a worker that dies holds its tasks
// for at most this long.
const MaxLeaseTTL = 24 * time.Hour

// Defaults of the session limits (server/sessions owns them).
const (
	DefaultMaxSessionConcurrency = sessions.DefaultMaxSessionConcurrency
	DefaultMaxSessionBytes       = sessions.DefaultMaxSessionBytes
	DefaultReclaimWindow         = sessions.DefaultReclaimWindow
)

// Defaults of the server's own settings (the others are the packages'
// that own their rules: lease.DefaultTTL, scheduler.DefaultRetention, ...).
const (
	// DefaultListen is the default listen address: loopback only.
	DefaultListen = "127.0.0.1:7420"
	// DefaultDataDir holds the data file unless DataDir says otherwise.
	DefaultDataDir = "./conveyor-data"
	// DefaultShutdownTimeout bounds a graceful stop.
	DefaultShutdownTimeout = 30 * time.Second
	// DefaultBackupStallTimeout is how long a backup waits for a client
	// that stopped reading.
	DefaultBackupStallTimeout = time.Minute
)

func (c *Config) setDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.DataDir == "" {
		c.DataDir = DefaultDataDir
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = lease.DefaultTTL
	}
	if c.LimitGrace == 0 {
		c.LimitGrace = lease.DefaultLimitGrace
	}
	if c.Retention == 0 {
		c.Retention = scheduler.DefaultRetention
	}
	if c.ArchiveRetention == 0 {
		c.ArchiveRetention = scheduler.DefaultArchiveRetention
	}
	if c.Backoff == nil {
		c.Backoff = scheduler.Backoff
	}
	c.GroupPolicy = c.GroupPolicy.WithDefaults(scheduler.DefaultGroupPolicy())
	if c.OpenBroker == nil {
		c.OpenBroker = OpenBolt(filepath.Join(c.DataDir, DataFile))
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = DefaultShutdownTimeout
	}
	if c.BackupStallTimeout <= 0 {
		c.BackupStallTimeout = DefaultBackupStallTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.MaxSessionConcurrency == 0 {
		c.MaxSessionConcurrency = DefaultMaxSessionConcurrency
	}
	if c.MaxSessionBytes == 0 {
		c.MaxSessionBytes = DefaultMaxSessionBytes
	}
	if c.ReclaimWindow == 0 {
		c.ReclaimWindow = DefaultReclaimWindow
	}
}

// pushKeys decodes c.PushSecrets.
func (c *Config) pushKeys() ([][]byte, error) {
	keys := make([][]byte, 0, len(c.PushSecrets))
	for i, s := range c.PushSecrets {
		k, err := push.ParseSecret(s)
		if err != nil {
			return nil, fmt.Errorf("config: PushSecrets[%d] (--push-secret): %w", i, err)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func (c *Config) validate() error {
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("config: TLSCertFile and TLSKeyFile (--tls-cert, --tls-key) must be given together")
	}
	if c.TLSCertFile != "" {
		if _, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile); err != nil {
			return fmt.Errorf("load the TLS key pair: %w", err)
		}
	}
	if c.LeaseTTL < time.Second || c.LeaseTTL > MaxLeaseTTL {
		return fmt.Errorf("config: LeaseTTL (--lease-ttl) must be 1s..%s, got %s", MaxLeaseTTL, c.LeaseTTL)
	}
	if c.Retention < 0 || c.ArchiveRetention < 0 {
		return errors.New("config: Retention and ArchiveRetention (--retention, --archive-retention) must not be negative")
	}
	if g := c.GroupPolicy; g.MaxSize < 1 || g.MaxSize > MaxGroupSize || g.MaxDelay > MaxGroupDelay || g.GracePeriod > MaxGroupDelay {
		return fmt.Errorf("config: GroupPolicy (--group-max-size, --group-max-delay, --group-grace-period) must be 1..%d members and at most %s, got %d, %s, %s",
			MaxGroupSize, MaxGroupDelay, g.MaxSize, g.MaxDelay, g.GracePeriod)
	}
	if c.LimitGrace < 0 {
		return fmt.Errorf("config: LimitGrace must not be negative, got %s", c.LimitGrace)
	}
	if c.MaxSessionConcurrency < 1 {
		return fmt.Errorf("config: MaxSessionConcurrency (--max-session-concurrency) must be at least 1, got %d", c.MaxSessionConcurrency)
	}
	if c.MaxSessionBytes < sessions.MaxEnvelopeBytes {
		return fmt.Errorf("config: MaxSessionBytes (--max-session-bytes) must be at least %d (one task of the largest size), got %d", sessions.MaxEnvelopeBytes, c.MaxSessionBytes)
	}
	if c.ReclaimWindow < 0 || c.ReclaimWindow > time.Hour {
		return fmt.Errorf("config: ReclaimWindow (--reclaim-window) must be at most 1h (0 means the default, %s), got %s", DefaultReclaimWindow, c.ReclaimWindow)
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("config: Listen (--listen) %q: %w", c.Listen, err)
	}
	if c.Token == "" && !c.AllowRemote && !isLoopback(host) {
		return fmt.Errorf("refusing to listen on %q without a token: it is not a loopback address. "+
			"Set --token (or CONVEYOR_TOKEN), or pass --allow-remote to serve without authentication", c.Listen)
	}
	return nil
}

// isLoopback reports whether host names only loopback interfaces. An empty
// host (all interfaces) is not loopback.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// compressMinBytes is the smallest response the server compresses (when
// the client accepts gzip). Below it, compression costs more CPU than the
// bytes it saves.
const compressMinBytes = 8 << 10
