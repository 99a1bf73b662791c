package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Config configures a Server. The zero value of each field means its
// documented default.
type Config struct {
	// Listen is the TCP address to serve on. Defaults to "127.0.0.1:7420".
	Listen string
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
	// heartbeat. Defaults to 60s. Workers are told to heartbeat every
	// LeaseTTL/3.
	LeaseTTL time.Duration
	// Retention is how long COMPLETED tasks are kept when the task does not
	// say. Defaults to 24h.
	Retention time.Duration
	// ArchiveRetention is how long ARCHIVED and CANCELED tasks are kept.
	// Defaults to 7 days.
	ArchiveRetention time.Duration
	// ShutdownTimeout bounds how long Stop waits for in-flight RPCs when its
	// context has no deadline. Defaults to 30s.
	ShutdownTimeout time.Duration
	// Logger receives the server's structured logs. Defaults to slog.Default().
	Logger *slog.Logger
	// Version is reported to clients. Defaults to buildinfo.Version.
	Version string
	// MaxSessionConcurrency bounds Hello.concurrency: a session that
	// declares more fails with invalid_argument. Defaults to
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
}

// MaxLeaseTTL bounds Config.LeaseTTL: a worker that dies holds its tasks
// for at most this long.
const MaxLeaseTTL = 24 * time.Hour

// Defaults of the session limits.
const (
	DefaultMaxSessionConcurrency = 4096
	DefaultMaxSessionBytes       = 64 << 20
	DefaultReclaimWindow         = 5 * time.Second
)

// DefaultListen is the default listen address: loopback only.
const DefaultListen = "127.0.0.1:7420"

func (c *Config) setDefaults() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.DataDir == "" {
		c.DataDir = "./conveyor-data"
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = 60 * time.Second
	}
	if c.Retention == 0 {
		c.Retention = 24 * time.Hour
	}
	if c.ArchiveRetention == 0 {
		c.ArchiveRetention = 7 * 24 * time.Hour
	}
	if c.ShutdownTimeout == 0 {
		c.ShutdownTimeout = 30 * time.Second
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

func (c *Config) validate() error {
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("--tls-cert and --tls-key must be given together")
	}
	if c.TLSCertFile != "" {
		if _, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile); err != nil {
			return fmt.Errorf("load the TLS key pair: %w", err)
		}
	}
	if c.LeaseTTL < time.Second || c.LeaseTTL > MaxLeaseTTL {
		return fmt.Errorf("LeaseTTL (--lease-ttl) must be 1s..%s, got %s", MaxLeaseTTL, c.LeaseTTL)
	}
	if c.Retention < 0 || c.ArchiveRetention < 0 {
		return errors.New("retention must not be negative")
	}
	if c.MaxSessionConcurrency < 1 {
		return fmt.Errorf("MaxSessionConcurrency must be at least 1, got %d", c.MaxSessionConcurrency)
	}
	if c.MaxSessionBytes < maxEnvelopeBytes {
		return fmt.Errorf("MaxSessionBytes must be at least %d (one task of the largest size), got %d", maxEnvelopeBytes, c.MaxSessionBytes)
	}
	if c.ReclaimWindow < 0 || c.ReclaimWindow > time.Hour {
		return fmt.Errorf("ReclaimWindow (--reclaim-window) must be 0..1h, got %s", c.ReclaimWindow)
	}
	host, _, err := net.SplitHostPort(c.Listen)
	if err != nil {
		return fmt.Errorf("--listen %q: %w", c.Listen, err)
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
