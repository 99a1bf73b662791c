package postgres_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
	"github.com/conveyor-dev/conveyor/broker/postgres"
	"github.com/conveyor-dev/conveyor/internal/pgtest"
	"github.com/conveyor-dev/conveyor/internal/testwait"
)

// TestLostCommitAnswerResyncsHints: an enqueue whose COMMIT reached the
// database but whose answer was lost (the connection cut under it) fails
// unavailable, yet its task is stored PENDING. Once a commit succeeds
// again the engine's counts are read from the database, so Ready counts
// that task too and a Lease hands it out: no stored task waits for a
// wake-up that never comes.
func TestLostCommitAnswerResyncsHints(t *testing.T) {
	t.Parallel()
	cut := startCommitCutter(t, pgtest.URL(t))
	e, err := postgres.Open(t.Context(), postgres.Config{URL: cut.url, Schema: pgtest.Schema(t, t.Name()), MaxConns: 2})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = e.Close() })
	enqueue := func(queue string) error {
		now := time.Now()
		res, err := e.Enqueue(t.Context(), broker.EnqueueParams{Now: now, Tasks: bt.WithStates([]broker.NewTask{bt.NewTask(queue)}, now)})
		if err == nil {
			err = res[0].Err
		}
		return err
	}
	ready := func() int {
		n := []int{0}
		e.Ready([]string{"q"}, n)
		return n[0]
	}
	if err := enqueue("q"); err != nil {
		t.Fatal(err)
	}
	cut.arm()
	if err := enqueue("q"); !errors.Is(err, broker.ErrUnavailable) {
		t.Fatalf("the enqueue whose commit answer was lost: %v, want unavailable", err)
	}
	cut.waitCut(t)
	if err := enqueue("other"); err != nil { // a commit that succeeds
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "Ready to count the task whose commit answer was lost", func() bool { return ready() == 2 })
	leases, err := e.Lease(t.Context(), broker.LeaseParams{SessionID: "s", Now: time.Now(), TTL: time.Minute,
		Picks: []broker.QueuePick{{Queue: "q", N: 10}}})
	if err != nil || len(leases) != 2 {
		t.Fatalf("Lease: %d leases, %v; want both tasks", len(leases), err)
	}
}

// commitCutter is a TCP proxy to the test database that can lose the
// answer to a COMMIT: armed, it passes the next COMMIT on (with whatever
// was sent with it), reads the
// database's answer (so the commit was applied), and closes the client's
// connection instead of passing the answer back.
type commitCutter struct {
	url    string
	target string
	armed  atomic.Bool
	cut    chan struct{}
	once   sync.Once
}

func startCommitCutter(t *testing.T, dbURL string) *commitCutter {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatalf("parse %s: %v", pgtest.EnvURL, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &commitCutter{target: u.Host, cut: make(chan struct{})}
	u.Host = ln.Addr().String()
	c.url = u.String()
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { c.serve(client) })
		}
	})
	return c
}

func (c *commitCutter) arm() { c.armed.Store(true) }

func (c *commitCutter) waitCut(t *testing.T) {
	t.Helper()
	select {
	case <-c.cut:
	case <-time.After(10 * time.Second):
		t.Fatal("no COMMIT went through the proxy while it was armed")
	}
}

// serve relays one connection: the client's messages one by one (to find
// a COMMIT), the database's bytes as they come unless muted.
func (c *commitCutter) serve(client net.Conn) {
	defer func() { _ = client.Close() }()
	server, err := net.Dial("tcp", c.target)
	if err != nil {
		return
	}
	defer func() { _ = server.Close() }()
	var mu sync.Mutex
	muted := false
	answered := make(chan struct{})
	go func() {
		buf := make([]byte, 32<<10)
		for {
			n, err := server.Read(buf)
			mu.Lock()
			if muted {
				mu.Unlock()
				close(answered)
				return
			}
			if n > 0 {
				_, _ = client.Write(buf[:n])
			}
			mu.Unlock()
			if err != nil {
				_ = client.Close()
				return
			}
		}
	}()
	// The startup message has no type byte; the rest do.
	if !relayMessage(client, server, false, nil) {
		return
	}
	commits := commitStatements{}
	cutting := false
	for {
		// A simple query is answered at once; a pipeline's statements once
		// its Sync is in.
		answerDue := false
		ok := relayMessage(client, server, true, func(typ byte, body []byte) {
			if !cutting && commits.runs(typ, body) && c.armed.CompareAndSwap(true, false) {
				cutting = true
				mu.Lock()
				muted = true
				mu.Unlock()
			}
			answerDue = typ == 'Q' || typ == 'S'
		})
		if !ok {
			return
		}
		if cutting && answerDue {
			<-answered // the database answered: the commit is applied
			c.once.Do(func() { close(c.cut) })
			return
		}
	}
}

// commitStatements finds a COMMIT among a connection's messages: a simple
// query, or the Bind of a statement whose Parse was a COMMIT (the engine
// sends its COMMIT in a pipeline, in the extended protocol).
type commitStatements map[string]bool

// runs reports whether a message of type typ with body runs a COMMIT,
// learning the statements that are one.
func (c commitStatements) runs(typ byte, body []byte) bool {
	isCommit := func(sql []byte) bool { return bytes.HasPrefix(bytes.ToLower(sql), []byte("commit")) }
	switch typ {
	case 'Q':
		return isCommit(body)
	case 'P': // Parse: the statement's name, then its text
		name, rest, _ := bytes.Cut(body, []byte{0})
		c[string(name)] = isCommit(rest)
	case 'B': // Bind: the portal's name, then the statement's
		_, rest, _ := bytes.Cut(body, []byte{0})
		name, _, _ := bytes.Cut(rest, []byte{0})
		return c[string(name)]
	}
	return false
}

// relayMessage copies one protocol message from src to dst, calling before
// with its type and body before passing it on.
func relayMessage(src, dst net.Conn, typed bool, before func(typ byte, body []byte)) bool {
	head := make([]byte, 4)
	var typ byte
	if typed {
		head = make([]byte, 5)
	}
	if _, err := io.ReadFull(src, head); err != nil {
		return false
	}
	if typed {
		typ = head[0]
	}
	n := int(binary.BigEndian.Uint32(head[len(head)-4:])) - 4
	if n < 0 {
		return false
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(src, body); err != nil {
		return false
	}
	if before != nil {
		before(typ, body)
	}
	_, err := dst.Write(append(head, body...))
	return err == nil
}
