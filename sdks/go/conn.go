package conveyor

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"time"

	"connectrpc.com/connect"
)

// Version is this SDK's version, sent to the server as Hello.sdk_version.
const Version = "v0.1.0"

// Protocol selects the ConnectRPC wire format.
type Protocol int

const (
	// ProtocolGRPC is gRPC over HTTP/2 (the default).
	ProtocolGRPC Protocol = iota
	// ProtocolGRPCWeb is gRPC-Web; it cannot carry a worker session.
	ProtocolGRPCWeb
	// ProtocolConnect is the Connect protocol with JSON messages, which
	// unary calls can also make over HTTP/1.1.
	ProtocolConnect
)

func (p Protocol) String() string {
	switch p {
	case ProtocolGRPC:
		return "grpc"
	case ProtocolGRPCWeb:
		return "grpc-web"
	case ProtocolConnect:
		return "connect"
	}
	return fmt.Sprintf("Protocol(%d)", int(p))
}

// Option configures how a Client or a Worker reaches the server. Every
// Option is also a WorkerOption, so NewWorker accepts it directly. A nil
// Option is ignored.
type Option interface {
	apply(*connConfig)
	// applyToWorker lets NewWorker take connection options alongside its
	// own WorkerOptions.
	applyToWorker(*workerConfig)
}

type optionFunc func(*connConfig)

func (f optionFunc) apply(c *connConfig) { f(c) }

func (f optionFunc) applyToWorker(c *workerConfig) { c.connOpts = append(c.connOpts, f) }

type connConfig struct {
	token      string
	protocol   Protocol
	httpClient *http.Client // WithHTTPClient's, or nil
	// httpClients are the distinct HTTP clients of the servers, once
	// newConnConfig has made them.
	httpClients []*http.Client
	tlsConfig   *tls.Config
	logger      *slog.Logger
	gzip        bool
	// A Client's enqueue settings; a Worker ignores them.
	noEnqueueBatching bool
	enqueueInFlight   int
	enqueueHooks      []EnqueueHook
	// errs are the options' programmer errors, which fail NewClient and
	// NewWorker.
	errs []error
}

// WithToken sets the bearer token sent on every call and at session open.
func WithToken(token string) Option {
	return optionFunc(func(c *connConfig) { c.token = token })
}

// WithProtocol selects the wire format. Defaults to ProtocolGRPC; a value
// that is not one of the three is refused by NewClient and NewWorker.
func WithProtocol(p Protocol) Option {
	return optionFunc(func(c *connConfig) {
		if p < ProtocolGRPC || p > ProtocolConnect {
			c.errs = append(c.errs, fmt.Errorf("conveyor: %s is not a protocol: use ProtocolGRPC, ProtocolGRPCWeb or ProtocolConnect", p))
			return
		}
		c.protocol = p
	})
}

// WithHTTPClient replaces the HTTP client. It must speak HTTP/2 to the
// server for gRPC and for worker sessions (see H2CClient for plaintext).
// Its Timeout bounds a Client's calls; a Worker's session, a stream that
// lasts as long as the Worker runs, is not bounded by it.
func WithHTTPClient(hc *http.Client) Option {
	return optionFunc(func(c *connConfig) { c.httpClient = hc })
}

// WithTLSConfig sets the TLS configuration for https:// addresses. The
// SDK uses a copy, so one config may serve several Clients and Workers.
// With an http:// address, or with WithHTTPClient (whose transport has
// its own TLS settings), it would go unused, and NewClient and NewWorker
// refuse it.
func WithTLSConfig(cfg *tls.Config) Option {
	return optionFunc(func(c *connConfig) { c.tlsConfig = cfg })
}

// WithGzip makes the SDK accept gzip-compressed responses, which the
// server uses for responses of 8 KiB and more (large EnqueueBatch and
// EnqueueTx results). Off by default: on a local network compression costs
// more CPU on both ends than the bytes it saves; turn it on across slow or
// metered links.
func WithGzip() Option {
	return optionFunc(func(c *connConfig) { c.gzip = true })
}

// WithLogger sets where the SDK logs (a Worker's session events).
// Defaults to discarding.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *connConfig) { c.logger = l })
}

// DefaultEnqueueInFlight is how many enqueue RPCs a Client has out at once
// before further Enqueue calls gather into a shared EnqueueBatch (see
// WithEnqueueInFlight). Two, from BenchmarkEnqueueParallel on a local
// network: 32 goroutines sharing a Client then enqueue 2 to 3 times as
// fast as with batching off, as fast as with one in flight (within the
// noise) and a little faster than with four; and two concurrent callers
// each still get an RPC at once, where with one in flight the second
// waits out the first's RPC, halving their throughput.
const DefaultEnqueueInFlight = 2

// WithEnqueueBatching turns the Client's enqueue batching on or off. It is
// on by default: concurrent Enqueue and EnqueueJSON calls share RPCs. A
// call made while fewer than WithEnqueueInFlight RPCs are out is sent at
// once, on its own, so an idle producer gets no added latency; calls made
// while that many are out gather and leave together, as one EnqueueBatch,
// when one of those returns (or at once when 1000 calls, or about 4 MiB of
// requests, have gathered). After a shared batch returns, the calls made
// next gather for a moment (at most half its round trip, and 1 ms) until
// as many as it served are back, so that busy producers keep sharing RPCs
// instead of splitting into small ones; a call sent on its own never holds
// the next ones. Each call still gets its own task or its own error,
// exactly as a call of its own would, and a call whose context ends before
// its batch leaves is taken out of it (its task is not sent). A shared
// EnqueueBatch serves many callers, so it carries none of their contexts'
// values or deadlines; it is canceled once every caller in it has given
// up. Off, every call is one Enqueue RPC on its caller's context. A Worker
// ignores this option.
func WithEnqueueBatching(on bool) Option {
	return optionFunc(func(c *connConfig) { c.noEnqueueBatching = !on })
}

// WithEnqueueInFlight sets how many enqueue RPCs a Client with enqueue
// batching (see WithEnqueueBatching) has out at once before further calls
// gather; a full batch leaves even beyond it. It must be > 0. Defaults to
// DefaultEnqueueInFlight (2). A Worker ignores this option.
func WithEnqueueInFlight(n int) Option {
	return optionFunc(func(c *connConfig) {
		if n <= 0 {
			c.errs = append(c.errs, fmt.Errorf("conveyor: enqueue in-flight must be > 0, got %d", n))
			return
		}
		c.enqueueInFlight = n
	})
}

// endpoint is one server of a Client's or a Worker's address: its URL and
// the HTTP client that reaches it.
type endpoint struct {
	url  string
	http *http.Client
}

// newConnConfig applies opts and checks addr (see parseServers), and
// returns the servers addr names, in order, each with its HTTP client:
// WithHTTPClient's for all of them, else one the SDK makes per scheme
// (h2c for http://, TLS for https://), shared by the servers of that
// scheme.
func newConnConfig(addr string, opts []Option) (*connConfig, []endpoint, error) {
	c := &connConfig{enqueueInFlight: DefaultEnqueueInFlight}
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
	if len(c.errs) > 0 {
		return nil, nil, errors.Join(c.errs...)
	}
	urls, err := parseServers(addr)
	if err != nil {
		return nil, nil, err
	}
	if err := c.checkTLS(urls); err != nil {
		return nil, nil, err
	}
	byScheme := map[string]*http.Client{}
	servers := make([]endpoint, len(urls))
	for i, u := range urls {
		hc := c.httpClient
		if hc == nil {
			hc = byScheme[u.Scheme]
		}
		if hc == nil {
			if u.Scheme == "https" {
				hc = tlsClient(c.tlsConfig)
			} else {
				hc = H2CClient()
			}
			byScheme[u.Scheme] = hc
		}
		if !slices.Contains(c.httpClients, hc) {
			c.httpClients = append(c.httpClients, hc)
		}
		servers[i] = endpoint{url: u.String(), http: hc}
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return c, servers, nil
}

// checkTLS refuses WithTLSConfig where it would go unused: with no
// https:// server, or beside WithHTTPClient. Refused rather than ignored,
// so that nothing connects without the TLS its caller asked for.
func (c *connConfig) checkTLS(urls []*url.URL) error {
	if c.tlsConfig == nil {
		return nil
	}
	if c.httpClient != nil {
		return errors.New("conveyor: WithTLSConfig is for https:// addresses with the SDK's own HTTP client, but WithHTTPClient's client has its own transport")
	}
	if slices.ContainsFunc(urls, func(u *url.URL) bool { return u.Scheme == "https" }) {
		return nil
	}
	why := "the address is http://, which does not use TLS"
	if len(urls) > 1 {
		why = "every address is http://, which does not use TLS"
	}
	return fmt.Errorf("conveyor: WithTLSConfig is for https:// addresses with the SDK's own HTTP client, but %s", why)
}

// closeIdleConnections closes the idle connections of every HTTP client
// in use.
func (c *connConfig) closeIdleConnections() {
	for _, hc := range c.httpClients {
		hc.CloseIdleConnections()
	}
}

// connectOptions are the connect client options for this configuration.
func (c *connConfig) connectOptions() []connect.ClientOption {
	var opts []connect.ClientOption
	switch c.protocol {
	case ProtocolGRPC:
		opts = append(opts, connect.WithGRPC())
	case ProtocolGRPCWeb:
		opts = append(opts, connect.WithGRPCWeb())
	case ProtocolConnect:
		opts = append(opts, connect.WithProtoJSON())
	}
	if c.token != "" {
		opts = append(opts, connect.WithInterceptors(bearerToken(c.token)))
	}
	if !c.gzip {
		opts = append(opts, connect.WithAcceptCompression("gzip", nil, nil))
	}
	return opts
}

// H2CClient returns an HTTP client that speaks HTTP/2 without TLS (prior
// knowledge), as gRPC and worker sessions need on a plaintext address.
func H2CClient() *http.Client {
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: &http.Transport{
		Protocols:       protocols,
		DialContext:     (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		IdleConnTimeout: 90 * time.Second,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: 30 * time.Second,
			PingTimeout:     15 * time.Second,
		},
	}}
}

func tlsClient(cfg *tls.Config) *http.Client {
	if cfg == nil {
		cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	} else {
		// The Transport writes the protocols it negotiates (h2) into its
		// config: a copy keeps the caller's unchanged, and lets one config
		// serve several Clients and Workers without a data race.
		cfg = cfg.Clone()
	}
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:   cfg,
		ForceAttemptHTTP2: true,
		DialContext:       (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		IdleConnTimeout:   90 * time.Second,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: 30 * time.Second,
			PingTimeout:     15 * time.Second,
		},
	}}
}

// TokenInterceptor returns a connect client interceptor that sends
// Authorization: Bearer <token> on every call and at every stream's open,
// for code that uses the generated clients (gen/) directly. Client and
// Worker do this themselves with WithToken.
func TokenInterceptor(token string) connect.Interceptor { return bearerToken(token) }

// bearerToken attaches Authorization: Bearer <token> to every request.
type bearerToken string

func (b bearerToken) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", "Bearer "+string(b))
		return next(ctx, req)
	}
}

func (b bearerToken) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return func(ctx context.Context, spec connect.Spec) connect.StreamingClientConn {
		conn := next(ctx, spec)
		conn.RequestHeader().Set("Authorization", "Bearer "+string(b))
		return conn
	}
}

func (b bearerToken) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}
