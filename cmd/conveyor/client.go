package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// clientFlags are the flags of every command that calls a server. Only
// these read the environment: a command's own flags (such as queue config's
// --group-max-size) must not pick up the server's CONVEYOR_* variables.
type clientFlags struct {
	Addr      string `default:"${default_addr}" env:"CONVEYOR_ADDR" help:"Server URL: http:// (HTTP/2 without TLS) or https://."`
	Token     string `env:"CONVEYOR_TOKEN" help:"Bearer token, if the server requires one."`
	TokenFile string `name:"token-file" env:"CONVEYOR_TOKEN_FILE" placeholder:"FILE" help:"Read the bearer token from FILE."`
	JSON      bool   `name:"json" help:"Print JSON for scripts: every field, stable indentation, lists as arrays."`
}

// conn is a connection to one server: the generated clients over one HTTP
// client, plus what the plain-HTTP endpoints (GET /backup) need.
type conn struct {
	base  string // the server URL, without a trailing slash
	token string
	http  *http.Client
	admin conveyorv1connect.AdminServiceClient
	tasks conveyorv1connect.TaskServiceClient
}

// dial checks the flags and builds the clients; it does not connect (the
// first call does).
func (f *clientFlags) dial() (*conn, error) {
	u, err := url.Parse(f.Addr)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErrorf("--addr %q must be an http:// or https:// URL", f.Addr)
	}
	token, err := f.token()
	if err != nil {
		return nil, err
	}
	c := &conn{base: strings.TrimSuffix(u.String(), "/"), token: token}
	if u.Scheme == "https" {
		// HTTP/2 comes from ALPN; gRPC needs it.
		c.http = &http.Client{Transport: &http.Transport{
			ForceAttemptHTTP2: true,
			TLSClientConfig:   &tls.Config{MinVersion: tls.VersionTLS12},
		}}
	} else {
		c.http = conveyor.H2CClient()
	}
	opts := []connect.ClientOption{connect.WithGRPC()}
	if token != "" {
		opts = append(opts, connect.WithInterceptors(conveyor.TokenInterceptor(token)))
	}
	c.admin = conveyorv1connect.NewAdminServiceClient(c.http, c.base, opts...)
	c.tasks = conveyorv1connect.NewTaskServiceClient(c.http, c.base, opts...)
	return c, nil
}

// token is --token or the contents of --token-file: the same rule as the
// server's flags of the same names.
func (f *clientFlags) token() (string, error) {
	if f.TokenFile == "" {
		return f.Token, nil
	}
	if f.Token != "" {
		return "", usageErrorf("--token and --token-file are mutually exclusive")
	}
	b, err := os.ReadFile(f.TokenFile)
	if err != nil {
		return "", fmt.Errorf("read --token-file: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", usageErrorf("--token-file %s is empty", f.TokenFile)
	}
	return token, nil
}

// sdk is the Go SDK's client over the same connection, for enqueue, whose
// flags map onto the SDK's task options.
func (c *conn) sdk() (*conveyor.Client, error) {
	opts := []conveyor.Option{conveyor.WithHTTPClient(c.http), conveyor.WithEnqueueBatching(false)}
	if c.token != "" {
		opts = append(opts, conveyor.WithToken(c.token))
	}
	return conveyor.NewClient(c.base, opts...)
}

// callContext is the context of a command's calls: canceled by Ctrl-C.
func callContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt)
}
