package server

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/scheduler"
)

// hub tracks the live worker sessions: it wakes the sessions serving a
// queue when the broker reports ready work, hands lapsed leases back to the
// sessions that held them, and ends every session at shutdown.
type hub struct {
	broker  broker.Broker
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	retrier scheduler.Retrier
	metrics *metrics
	// registry records the sessions for the other nodes (nil: the engine
	// keeps no session registry).
	registry *registryWriter

	boot string // bootID, the prefix of attempt ids

	mu       sync.RWMutex
	sessions map[string]*session
	byQueue  map[string][]*session
	closing  bool
	// closed is closed with closing set: a stream still waiting for its
	// Hello ends then too.
	closed chan struct{}
	wg     sync.WaitGroup

	// lateResults counts Results dropped because their lease had lapsed or
	// been reassigned; unknownResults counts Results for tasks the session
	// does not hold (never held, or already answered: a repeated Result).
	lateResults, unknownResults atomic.Int64
}

func newHub(b broker.Broker, cfg Config, r scheduler.Retrier, m *metrics, log *slog.Logger, now func() time.Time) *hub {
	return &hub{broker: b, cfg: cfg, log: log, now: now, retrier: r, metrics: m, boot: bootID(),
		sessions: map[string]*session{}, byQueue: map[string][]*session{}, closed: make(chan struct{})}
}

// bootID is a short random id of this server process, the prefix of its
// attempt ids: lease tokens start over when the process does.
func bootID() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// attemptID names the delivery of lease token: unique per delivery (the
// token is unique within the process, the boot id across processes).
func (h *hub) attemptID(token uint64) string {
	return h.boot + "-" + strconv.FormatUint(token, 36)
}

// register adds a session; it fails when the server is shutting down.
func (h *hub) register(s *session) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return false
	}
	h.sessions[s.id] = s
	for _, q := range s.queues {
		h.byQueue[q] = append(h.byQueue[q], s)
	}
	h.wg.Add(1)
	if h.registry != nil {
		h.registry.opened(s.registryInfo())
	}
	return true
}

// unregister removes a session. Its leases were released when it ended.
func (h *hub) unregister(s *session) {
	h.mu.Lock()
	delete(h.sessions, s.id)
	for _, q := range s.queues {
		list := h.byQueue[q]
		for i, x := range list {
			if x == s {
				list = append(list[:i], list[i+1:]...)
				break
			}
		}
		if len(list) == 0 {
			delete(h.byQueue, q)
		} else {
			h.byQueue[q] = list
		}
	}
	h.mu.Unlock()
	s.end(errShuttingDown) // a no-op unless the session is still running
	if h.registry != nil {
		h.registry.closed(s.id)
	}
	h.wg.Done()
}

// wakeQueue wakes every session serving queue that has a free slot. One
// whose slots are all taken could lease nothing; it wakes itself when a
// slot frees, and reads the ready counts then. Waking it anyway would have
// it read the counts of all its queues under the broker's lock for
// nothing, for each busy session of the queue, on every task that makes
// the queue ready.
func (h *hub) wakeQueue(queue string) {
	h.mu.RLock()
	for _, s := range h.byQueue[queue] {
		if s.hasRoom() {
			s.wake()
		}
	}
	h.mu.RUnlock()
}

// leaseLapsed tells the session that held a lease that the reaper took it
// back. It runs under the broker's lock, so it only takes the hub's and the
// session's locks, which are never held while calling the broker.
func (h *hub) leaseLapsed(l broker.LapsedLease) {
	h.mu.RLock()
	s := h.sessions[l.SessionID]
	h.mu.RUnlock()
	if s != nil {
		s.leaseLapsed(l)
	}
}

// Start starts the registry's writer, if any: sessions register as their
// streams open.
func (h *hub) Start(ctx context.Context) error {
	if h.registry != nil {
		return h.registry.Start(ctx)
	}
	return nil
}

// Stop ends every session, refuses new ones, and waits, bounded by ctx,
// until every session has unregistered; then it writes their ends to the
// registry, if any. It is idempotent.
func (h *hub) Stop(ctx context.Context) error {
	h.closeAll()
	done := make(chan struct{})
	go func() {
		h.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if h.registry != nil {
		return h.registry.Stop(ctx)
	}
	return nil
}

// cancelRunning tells the session that holds a lease an operator canceled
// to stop the task (protocol §5.7); its Result still comes, and decides.
func (h *hub) cancelRunning(l broker.LapsedLease) {
	h.mu.RLock()
	s := h.sessions[l.SessionID]
	h.mu.RUnlock()
	if s != nil {
		s.cancelRunning(l.Lease)
	}
}

// closeAll ends every session, and every stream still waiting for its
// Hello, and refuses new ones.
func (h *hub) closeAll() {
	h.mu.Lock()
	if !h.closing {
		h.closing = true
		close(h.closed)
	}
	list := make([]*session, 0, len(h.sessions))
	for _, s := range h.sessions {
		list = append(list, s)
	}
	h.mu.Unlock()
	for _, s := range list {
		s.shutdown()
	}
}

// count is the number of live sessions.
func (h *hub) count() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.sessions)
}

// hubLoad is what the live sessions hold, in all.
type hubLoad struct{ sessions, slots, inFlight int }

// load sums the live sessions' windows (their concurrency, capped at
// MaxSessionConcurrency: the slots the server may fill) and taken slots.
func (h *hub) load() hubLoad {
	h.mu.RLock()
	defer h.mu.RUnlock()
	l := hubLoad{sessions: len(h.sessions)}
	for _, s := range h.sessions {
		s.mu.Lock()
		l.slots += s.window
		l.inFlight += s.flight.slots
		s.mu.Unlock()
	}
	return l
}

// list snapshots the live sessions, ordered by id.
func (h *hub) list() []sessionInfo {
	h.mu.RLock()
	out := make([]sessionInfo, 0, len(h.sessions))
	for _, s := range h.sessions {
		out = append(out, s.info())
	}
	h.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// loads snapshots the live sessions' loads, for the registry.
func (h *hub) loads() []broker.SessionLoad {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]broker.SessionLoad, 0, len(h.sessions))
	for _, s := range h.sessions {
		s.mu.Lock()
		out = append(out, broker.SessionLoad{ID: s.id, InFlight: int32(s.flight.slots), LastHeartbeat: s.lastHeartbeat})
		s.mu.Unlock()
	}
	return out
}

// registryInfo is the registry's record of the live session id.
func (h *hub) registryInfo(id string) (broker.SessionInfo, bool) {
	h.mu.RLock()
	s := h.sessions[id]
	h.mu.RUnlock()
	if s == nil {
		return broker.SessionInfo{}, false
	}
	return s.registryInfo(), true
}
