package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/sdks/go/conformance/handlers"
)

// config is the conformance worker's configuration, read from the
// environment only (CONTRACT.md, "SDK conformance worker").
type config struct {
	url         string
	token       string
	queues      map[string]int32
	concurrency int
	protocol    conveyor.Protocol
	batchTypes  []string
	drain       time.Duration
	tlsCA       string
	releaseID   string
	onceLog     string
}

// Defaults the contract pins.
const (
	defaultConcurrency = 4
	defaultDrain       = 5000 * time.Millisecond
)

// loadConfig reads the configuration through getenv and says what is wrong
// with it, naming the variable.
func loadConfig(getenv func(string) string) (*config, error) {
	c := &config{
		url:         getenv("CONVEYOR_URL"),
		token:       getenv("CONVEYOR_TOKEN"),
		queues:      map[string]int32{"default": 1},
		concurrency: defaultConcurrency,
		protocol:    conveyor.ProtocolGRPC,
		drain:       defaultDrain,
		tlsCA:       getenv("CONVEYOR_TLS_CA"),
		releaseID:   getenv(conveyor.EnvReleaseID),
		onceLog:     getenv(handlers.EnvOnceLog),
	}
	var errs []error
	if !strings.HasPrefix(c.url, "http://") && !strings.HasPrefix(c.url, "https://") {
		errs = append(errs, fmt.Errorf("CONVEYOR_URL must be an http:// or https:// URL, got %q", c.url))
	}
	if v := getenv("CONVEYOR_QUEUES"); v != "" {
		q, err := parseQueues(v)
		if err != nil {
			errs = append(errs, err)
		}
		c.queues = q
	}
	if v := getenv("CONVEYOR_CONCURRENCY"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("CONVEYOR_CONCURRENCY must be an integer > 0, got %q", v))
		}
		c.concurrency = n
	}
	switch v := getenv("CONVEYOR_PROTOCOL"); v {
	case "", "grpc":
	case "connect":
		c.protocol = conveyor.ProtocolConnect
	default:
		errs = append(errs, fmt.Errorf("CONVEYOR_PROTOCOL must be grpc or connect, got %q", v))
	}
	if v := getenv("CONVEYOR_BATCH_TYPES"); v != "" {
		for t := range strings.SplitSeq(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				c.batchTypes = append(c.batchTypes, t)
			}
		}
	}
	if v := getenv("CONVEYOR_DRAIN_MS"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 || ms > int64(time.Hour/time.Millisecond) {
			errs = append(errs, fmt.Errorf("CONVEYOR_DRAIN_MS must be an integer of milliseconds, 0..3600000, got %q", v))
		}
		c.drain = time.Duration(ms) * time.Millisecond
	}
	return c, errors.Join(errs...)
}

// parseQueues parses "name=weight,...". The SDK checks names and weights
// by the server's rules; this checks the shape.
func parseQueues(v string) (map[string]int32, error) {
	q := map[string]int32{}
	for item := range strings.SplitSeq(v, ",") {
		name, weight, ok := strings.Cut(strings.TrimSpace(item), "=")
		w, err := strconv.ParseInt(weight, 10, 32)
		if !ok || name == "" || err != nil || w <= 0 {
			return nil, fmt.Errorf("CONVEYOR_QUEUES must be name=weight,... with weights > 0, got %q in %q", item, v)
		}
		q[name] = int32(w)
	}
	return q, nil
}

// options returns the SDK options the configuration makes.
func (c *config) options() ([]conveyor.WorkerOption, error) {
	opts := []conveyor.WorkerOption{
		conveyor.WithQueues(c.queues),
		conveyor.WithConcurrency(c.concurrency),
		conveyor.WithProtocol(c.protocol),
		conveyor.WithDrainGrace(c.drain),
		conveyor.WithLabels(map[string]string{"conformance": "go"}),
		// From this environment, as the rest (the SDK would read the
		// process's own otherwise).
		conveyor.WithReleaseID(c.releaseID),
	}
	if c.token != "" {
		opts = append(opts, conveyor.WithToken(c.token))
	}
	if c.tlsCA != "" {
		pem, err := os.ReadFile(c.tlsCA)
		if err != nil {
			return nil, fmt.Errorf("CONVEYOR_TLS_CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CONVEYOR_TLS_CA: %s holds no PEM certificate", c.tlsCA)
		}
		opts = append(opts, conveyor.WithTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	}
	return opts, nil
}
