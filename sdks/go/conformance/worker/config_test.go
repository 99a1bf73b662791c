package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadConfigDefaults(t *testing.T) {
	c, err := loadConfig(envOf(map[string]string{"CONVEYOR_URL": "http://127.0.0.1:1"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.queues) != 1 || c.queues["default"] != 1 || c.concurrency != 4 || c.drain != 5*time.Second ||
		c.protocol != conveyor.ProtocolGRPC || c.batchTypes != nil {
		t.Fatalf("defaults = %+v", c)
	}
}

func TestLoadConfigParses(t *testing.T) {
	c, err := loadConfig(envOf(map[string]string{
		"CONVEYOR_URL": "https://x:1", "CONVEYOR_QUEUES": "a=3, b.c=1", "CONVEYOR_CONCURRENCY": "7",
		"CONVEYOR_PROTOCOL": "connect", "CONVEYOR_BATCH_TYPES": "conformance.batch,x", "CONVEYOR_DRAIN_MS": "250",
		"CONVEYOR_RELEASE_ID": "r7", "CONVEYOR_ONCE_LOG": "/tmp/once.log",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if c.queues["a"] != 3 || c.queues["b.c"] != 1 || c.concurrency != 7 || c.protocol != conveyor.ProtocolConnect ||
		len(c.batchTypes) != 2 || c.drain != 250*time.Millisecond || c.releaseID != "r7" || c.onceLog != "/tmp/once.log" {
		t.Fatalf("config = %+v", c)
	}
}

// TestBadConfigExits2 pins exit status 2 and a message naming the variable.
func TestBadConfigExits2(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"CONVEYOR_URL":         {},
		"CONVEYOR_QUEUES":      {"CONVEYOR_QUEUES": "a=0"},
		"CONVEYOR_CONCURRENCY": {"CONVEYOR_CONCURRENCY": "-1"},
		"CONVEYOR_PROTOCOL":    {"CONVEYOR_PROTOCOL": "grpc-web"},
		"CONVEYOR_DRAIN_MS":    {"CONVEYOR_DRAIN_MS": "soon"},
		"CONVEYOR_TLS_CA":      {"CONVEYOR_TLS_CA": "/nonexistent/ca.pem"},
		"queue name":           {"CONVEYOR_QUEUES": "-bad=1"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, ok := env["CONVEYOR_URL"]; !ok && name != "CONVEYOR_URL" {
				env["CONVEYOR_URL"] = "http://127.0.0.1:1"
			}
			var stdout, stderr bytes.Buffer
			if code := run(envOf(env), &stdout, &stderr); code != exitBadConfig {
				t.Fatalf("exit %d, want %d; stderr %s", code, exitBadConfig, stderr.String())
			}
			want := name
			if name == "queue name" {
				want = "-bad"
			}
			if !strings.Contains(stderr.String(), want) || stdout.Len() != 0 {
				t.Fatalf("stderr %q does not name %s, or stdout %q is not empty", stderr.String(), want, stdout.String())
			}
		})
	}
}
