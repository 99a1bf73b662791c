package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
)

// This file carries the hints across nodes. Each node's hints follow the
// transactions it commits (hints.go); with other nodes on the database,
// it must also learn what theirs did: that a queue has tasks ready (so an
// idle session here leases them), that an earlier timer was set (so the
// leader's promoter wakes), that a running task was canceled (so the
// session holding it here tells its worker). So each node sends what its
// commits changed with pg_notify after they commit, coalesced (one
// notification carries every commit since the last one went), and LISTENs
// for the others'. A notification is sent only while other nodes are live.
//
// Notifications are hints as the counts are: one can be lost (a node
// killed between its commit and its notification, the listener's
// connection cut). So a node reads its hints again from the database when
// it joins (after the others had time to see it), when its listener
// reconnects, when the leader swept a dead node, when a notification
// could not be sent, and every resyncEvery while others are live. Each
// notification names the transactions it reports, so that a read never
// counts one twice (resync.go, snapshot.go).

// resyncEvery is how often a node with live peers reads its hints again,
// whatever the notifications said: it bounds how long counts stay wrong
// after a loss no event announced.
const resyncEvery = 30 * time.Second

// notifyLinger is how long the sender waits after a commit for more to
// send with it.
const notifyLinger = 2 * time.Millisecond

// maxPayload bounds one notification (PostgreSQL's limit is 8000 bytes).
const maxPayload = 7800

// message is one notification: what a node's commits changed since its
// last one.
type message struct {
	// From is the sending process (a random id, not the node id, which a
	// rejoin changes).
	From string `json:"f"`
	// Txns are what each transaction committed changed, in order.
	Txns     []wireTxn `json:"t,omitempty"`
	Promote  int64     `json:"p,omitempty"`
	PurgeOwn int64     `json:"o,omitempty"`
	Ended    []int64   `json:"e,omitempty"`
	Crons    bool      `json:"c,omitempty"`
	// Configs names the queues whose configuration changed (or that were
	// deleted): the receivers read them again.
	Configs []string `json:"k,omitempty"`
	// Cancels are running tasks an operator canceled.
	Cancels []broker.LapsedLease `json:"x,omitempty"`
	// Resync asks every node to read its hints again.
	Resync bool `json:"r,omitempty"`
	// Joined announces a node that just joined: the others send their
	// notifications from now on, not from their next heartbeat.
	Joined bool `json:"j,omitempty"`
}

// wireTxn is what one transaction changed of the queues.
type wireTxn struct {
	// XID is the transaction's id (0: not known), so that a node whose
	// resync read it does not count it again.
	XID    uint64                `json:"i,omitempty"`
	Queues map[string]*wireDelta `json:"q"`
}

// wireDelta is a queueDelta on the wire.
type wireDelta struct {
	Counts broker.Counts       `json:"s"`
	Ready  int64               `json:"r,omitempty"`
	Groups map[int64]wireGroup `json:"g,omitempty"`
	Totals [4]int64            `json:"t"`
}

type wireGroup struct {
	Type string `json:"t"`
	Live int    `json:"l"`
}

func (m *message) empty() bool {
	return len(m.Txns) == 0 && m.Promote == 0 && m.PurgeOwn == 0 && m.Ended == nil && !m.Crons &&
		len(m.Configs) == 0 && len(m.Cancels) == 0 && !m.Resync && !m.Joined
}

// events sends this node's notifications and applies the others'.
type events struct {
	e       *Engine
	channel string
	self    string
	// peers counts the other live nodes (the heartbeat sets it): with
	// none, nothing is sent.
	peers atomic.Int64

	mu   sync.Mutex
	out  message
	wake chan struct{}
	// listenerPID is the listener's backend, for tests that cut it;
	// received counts the other nodes' notifications received.
	listenerPID atomic.Uint32
	received    atomic.Int64

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// channelFor names the notification channel of a schema: schemas of one
// database are apart.
func channelFor(schema string) string {
	h := fnv.New64a()
	h.Write([]byte(schema))
	return "conveyor_" + hex.EncodeToString(h.Sum(nil))
}

func (ev *events) init(e *Engine, schema string) {
	var b [8]byte
	_, _ = rand.Read(b[:])
	ev.e, ev.channel, ev.self = e, channelFor(schema), hex.EncodeToString(b[:])
	ev.wake = make(chan struct{}, 1)
}

// start starts the listener, once it listens, and the sender.
func (ev *events) start(ctx context.Context) error {
	conn, err := ev.connect(ctx)
	if err != nil {
		return err
	}
	run, cancel := context.WithCancel(context.Background())
	ev.cancel = cancel
	ev.wg.Add(2)
	go ev.listen(run, conn)
	go ev.send(run)
	return nil
}

// stop stops both, then sends what is left (a node's last commits, such
// as the release of its sessions' tasks on a clean stop).
func (ev *events) stop() {
	if ev.cancel == nil {
		return
	}
	ev.cancel()
	ev.wg.Wait()
	ev.cancel = nil
	ev.mu.Lock()
	m := ev.out
	ev.out = message{}
	ev.mu.Unlock()
	if m.empty() {
		return
	}
	m.From = ev.self
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := ev.sendMessage(ctx, &m); err != nil {
		ev.e.log.Warn("node notification failed on close", "err", err)
	}
}

// connect opens the listener's own connection and listens on it.
func (ev *events) connect(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, ev.e.pool.Config().ConnConfig.Copy())
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ev.channel}.Sanitize()); err != nil {
		_ = conn.Close(ctx)
		return nil, err
	}
	ev.listenerPID.Store(conn.PgConn().PID())
	return conn, nil
}

// listen applies the others' notifications until ctx ends, reconnecting
// (and reading the hints again, for what passed meanwhile) when its
// connection fails.
func (ev *events) listen(ctx context.Context, conn *pgx.Conn) {
	defer ev.wg.Done()
	wait := 100 * time.Millisecond
	for {
		if conn != nil {
			wait = 100 * time.Millisecond
			for {
				n, err := conn.WaitForNotification(ctx)
				if err != nil {
					break
				}
				ev.receive(n.Payload)
			}
			_ = conn.Close(context.Background())
			conn = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 2*time.Second)
		c, err := ev.connect(ctx)
		if err != nil {
			// The fallback poll: while the listener is down, the hints
			// are read again at each attempt (every 2 s at most), so the
			// other nodes' work still reaches this one's sessions.
			if ev.peers.Load() > 0 {
				ev.e.hintsStale.Store(true)
				ev.e.startResync()
			}
			continue
		}
		conn = c
		ev.e.log.Info("node listener reconnected: reading the queue counts again")
		ev.e.hintsStale.Store(true)
		ev.e.startResync()
	}
}

// receive applies one notification of another process.
func (ev *events) receive(payload string) {
	var m message
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		ev.e.log.Warn("unreadable node notification", "err", err)
		return
	}
	if m.From == ev.self {
		return
	}
	ev.received.Add(1)
	ev.e.applyRemote(&m)
}

// add records what a committed transaction did, for the next notification.
func (ev *events) add(t *txn) {
	if ev.peers.Load() == 0 || ev.channel == "" {
		return
	}
	ev.mu.Lock()
	m := &ev.out
	if len(t.queues) > 0 {
		m.Txns = append(m.Txns, wireTxnOf(t))
	}
	earliest(&m.Promote, t.promoteAt)
	earliest(&m.PurgeOwn, t.purgeOwnAt)
	for c, at := range t.ended {
		if at != 0 {
			if m.Ended == nil {
				m.Ended = make([]int64, numClasses)
			}
			earliest(&m.Ended[c], at)
		}
	}
	m.Crons = m.Crons || t.cronsChanged
	m.Cancels = append(m.Cancels, t.canceledRunning...)
	ev.mu.Unlock()
	ev.signal()
}

// announce tells the other nodes that this one joined, with peers of them
// live: they count it at once.
func (ev *events) announce(ctx context.Context, peers int64) error {
	ev.peers.Store(peers)
	if peers == 0 {
		return nil
	}
	return ev.sendMessage(ctx, &message{From: ev.self, Joined: true})
}

// configChanged records that queue's configuration changed.
func (ev *events) configChanged(queue string) {
	if ev.peers.Load() == 0 || ev.channel == "" {
		return
	}
	ev.mu.Lock()
	ev.out.Configs = append(ev.out.Configs, queue)
	ev.mu.Unlock()
	ev.signal()
}

// requestResync asks every other node to read its hints again.
func (ev *events) requestResync() {
	if ev.peers.Load() == 0 || ev.channel == "" {
		return
	}
	ev.mu.Lock()
	ev.out.Resync = true
	ev.mu.Unlock()
	ev.signal()
}

func (ev *events) signal() {
	select {
	case ev.wake <- struct{}{}:
	default:
	}
}

// send sends the notifications until ctx ends.
func (ev *events) send(ctx context.Context) {
	defer ev.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ev.wake:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(notifyLinger):
		}
		ev.mu.Lock()
		m := ev.out
		ev.out = message{}
		ev.mu.Unlock()
		if m.empty() {
			continue
		}
		m.From = ev.self
		if err := ev.sendMessage(ctx, &m); err != nil && ctx.Err() == nil {
			// What it carried is lost to the others: they read their
			// hints again instead, once a notification goes through.
			ev.e.log.Warn("node notification failed", "err", err)
			ev.requestResync()
			select {
			case <-ctx.Done():
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
}

// sendMessage sends m, in parts when it is too long for one notification.
func (ev *events) sendMessage(ctx context.Context, m *message) error {
	for _, part := range split(m) {
		payload, err := json.Marshal(part)
		if err != nil {
			return err
		}
		if len(payload) > maxPayload {
			payload, _ = json.Marshal(message{From: ev.self, Resync: true})
		}
		if _, err := ev.e.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, ev.channel, string(payload)); err != nil {
			return err
		}
	}
	return nil
}

// wireTxnOf is what t changed of the queues, on the wire.
func wireTxnOf(t *txn) wireTxn {
	w := wireTxn{XID: t.xid, Queues: make(map[string]*wireDelta, len(t.queues))}
	for name, d := range t.queues {
		q := &wireDelta{Counts: d.counts, Ready: d.ready, Totals: [4]int64{d.enqueued, d.processed, d.failed, d.expired}}
		for gid, g := range d.groups {
			if q.Groups == nil {
				q.Groups = map[int64]wireGroup{}
			}
			q.Groups[gid] = wireGroup{Type: g.typ, Live: g.live}
		}
		w.Queues[name] = q
	}
	return w
}

// split cuts m into parts that each fit a notification: the transactions
// go a few at a time, the rest with the first part.
func split(m *message) []*message {
	const perPart = 24
	if len(m.Txns) <= perPart {
		return []*message{m}
	}
	first := *m
	first.Txns = m.Txns[:perPart]
	parts := []*message{&first}
	for rest := m.Txns[perPart:]; len(rest) > 0; {
		n := min(perPart, len(rest))
		parts = append(parts, &message{From: m.From, Txns: rest[:n]})
		rest = rest[n:]
	}
	return parts
}
