// Package pgtest gives tests a PostgreSQL database to run on: the one
// CONVEYOR_TEST_DATABASE_URL names (.ci/run and `make pg` start one), with
// a schema of their own so that they run in parallel.
package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL is the variable that names the test database.
const EnvURL = "CONVEYOR_TEST_DATABASE_URL"

// URL returns the test database's URL, and fails the test (it does not skip
// it) when none is set, saying how to start one.
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(EnvURL)
	if url == "" {
		t.Fatalf("%s is not set: the PostgreSQL engine's tests need a database. "+
			"Start a throwaway one with `eval \"$(make -s pg)\"` (Debian's postgresql package; see the README), "+
			"or point %s at a postgres:// URL whose user may CREATE SCHEMA", EnvURL, EnvURL)
	}
	return url
}

// Schema returns a schema name for the store a test uses (the same store
// always gets the same schema, so a test can reopen it), and drops the
// schema when the test ends.
func Schema(t testing.TB, store string) string {
	t.Helper()
	sum := sha256.Sum256([]byte(store))
	name := "t_" + hex.EncodeToString(sum[:10])
	url := URL(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema %s: %v", name, err)
			return
		}
		defer func() { _ = conn.Close(ctx) }()
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", name, err)
		}
	})
	return name
}

// Cluster is a PostgreSQL server of a test's own, which the test may stop
// and start (an outage, a crash): made with Debian's postgresql programs
// in a temporary directory, on a free loopback port, and removed when the
// test ends. Run as root, the server runs as the postgres user.
type Cluster struct {
	t       testing.TB
	bin     string
	dir     string
	port    int
	runAsPG bool
	// URL is the cluster's database.
	URL string
}

// NewCluster initializes and starts a cluster.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Fatalf("PostgreSQL's server programs are missing (initdb): apt-get install postgresql")
	}
	sort.Strings(bins)
	c := &Cluster{t: t, bin: filepath.Dir(bins[len(bins)-1]), runAsPG: os.Geteuid() == 0}
	dir, err := os.MkdirTemp("", "conveyor-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	c.dir = dir
	t.Cleanup(func() {
		_ = c.run("pg_ctl", "-D", c.data(), "-m", "immediate", "-w", "stop")
		_ = os.RemoveAll(dir)
	})
	if c.runAsPG {
		if err := exec.Command("chown", "postgres:", dir).Run(); err != nil {
			t.Fatalf("chown %s: %v", dir, err)
		}
	}
	if err := c.run("initdb", "-D", c.data(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale"); err != nil {
		t.Fatalf("initdb: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.port = l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	c.URL = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
	c.Start()
	return c
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// Start starts the cluster and waits until it accepts connections.
func (c *Cluster) Start() {
	c.t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", c.port, c.dir)
	if err := c.run("pg_ctl", "-D", c.data(), "-l", filepath.Join(c.dir, "log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(c.dir, "log"))
		c.t.Fatalf("pg_ctl start: %v\n%s", err, log)
	}
}

// Stop stops the cluster in mode (pg_ctl -m: "fast", "immediate").
func (c *Cluster) Stop(mode string) {
	c.t.Helper()
	if err := c.run("pg_ctl", "-D", c.data(), "-m", mode, "-w", "stop"); err != nil {
		c.t.Fatalf("pg_ctl stop -m %s: %v", mode, err)
	}
}

// run runs one of the server's programs, as the postgres user when root.
func (c *Cluster) run(prog string, args ...string) error {
	path := filepath.Join(c.bin, prog)
	var cmd *exec.Cmd
	if c.runAsPG {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", prog, err, out)
	}
	return nil
}
