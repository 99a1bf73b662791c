package server

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"
)

// Limits on what one request may carry. A request larger than
// MaxRequestBytes fails with resource_exhausted; one item with a payload of
// MaxPayloadBytes always fits.
const (
	// MaxPayloadBytes bounds one task payload (1 MiB), as the protocol says.
	MaxPayloadBytes = 1 << 20
	// MaxBatchItems bounds EnqueueBatch and EnqueueTx.
	MaxBatchItems = 1000
	// MaxRequestBytes bounds one request message (32 MiB), and one worker frame.
	MaxRequestBytes = 32 << 20
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
}

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
	if c.LeaseTTL < time.Second {
		return fmt.Errorf("--lease-ttl must be at least 1s, got %s", c.LeaseTTL)
	}
	if c.Retention < 0 || c.ArchiveRetention < 0 {
		return errors.New("retention must not be negative")
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
