package sessions

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/scheduler"
)

// Hub tracks the live worker sessions: it serves each session's stream
// (Serve), wakes the sessions serving a queue when the broker reports
// ready work, hands lapsed leases back to the sessions that held them, and
// ends every session at shutdown. Its methods are safe for concurrent use.
type Hub struct {
	broker  broker.Broker
	cfg     Config
	log     *slog.Logger
	now     func() time.Time
	retrier scheduler.Retrier
	metrics Metrics
	// registry records the sessions for the other nodes (nil: the engine
	// keeps no session registry).
	registry *registryWriter
	// extras are consumers other than sessions that the registry lists
	// with them (the push endpoints this node invokes); nil: none. Set
	// before Start.
	extras func() []broker.SessionInfo

	boot string // bootID, the prefix of attempt ids

	mu       sync.RWMutex
	sessions map[string]*session
	byQueue  map[string][]*session
	closing  bool
	// releases are the releases this node has seen sessions of (or
	// listed), versioned counts its live sessions that name one
	// (release.go).
	releases  map[string]broker.Release
	versioned atomic.Int64
	// closed is closed with closing set: a stream still waiting for its
	// Hello ends then too.
	closed chan struct{}
	wg     sync.WaitGroup

	// lateResults counts Results dropped because their lease had lapsed or
	// been reassigned; unknownResults counts Results for tasks the session
	// does not hold (never held, or already answered: a repeated Result).
	lateResults, unknownResults atomic.Int64
}

// NewHub returns a hub of no session that serves sessions with b: it
// leases, extends, releases and completes through b, decides what each
// worker's Result leads to with r, records what it sees in m, logs to log
// (as component "sessions", and "session-registry") and reads the time
// from now. cfg holds the session settings (see Config). Sessions register
// as their streams open (Serve). On an engine that keeps a session
// registry (broker.SessionRegistry), the hub records its sessions there,
// from Start to Stop, for the other nodes' ListWorkers.
func NewHub(b broker.Broker, cfg Config, r scheduler.Retrier, m Metrics, log *slog.Logger, now func() time.Time) *Hub {
	h := &Hub{broker: b, cfg: cfg, log: log.With("component", "sessions"), now: now, retrier: r, metrics: m, boot: bootID(),
		sessions: map[string]*session{}, byQueue: map[string][]*session{}, closed: make(chan struct{}),
		releases: map[string]broker.Release{}}
	if reg, ok := b.(broker.SessionRegistry); ok {
		h.registry = newRegistryWriter(reg, h, log.With("component", "session-registry"))
	}
	return h
}

// bootID is a short random id of this server process, the prefix of its
// attempt ids: lease tokens start over when the process does.
func bootID() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b[:]))
}

// AttemptID names the delivery of lease token: unique per delivery (the
// token is unique within the process, the boot id across processes).
func (h *Hub) AttemptID(token uint64) string {
	return h.boot + "-" + strconv.FormatUint(token, 36)
}

// register adds a session; it fails when the server is shutting down.
func (h *Hub) register(s *session) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closing {
		return false
	}
	h.sessions[s.id] = s
	for _, q := range s.queues {
		h.byQueue[q] = append(h.byQueue[q], s)
	}
	if s.rel.ID != "" {
		h.versioned.Add(1)
		h.unparkLocked(s.queues)
	}
	h.wg.Add(1)
	if h.registry != nil {
		h.registry.opened(s.registryInfo())
	}
	return true
}

// unregister removes a session. Its leases were released when it ended.
func (h *Hub) unregister(s *session) {
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
	if s.rel.ID != "" {
		// The older sessions it kept work from look again.
		h.versioned.Add(-1)
		h.wakeQueues(slices.Clone(s.queues))
	}
	s.end(errShuttingDown) // a no-op unless the session is still running
	if h.registry != nil {
		h.registry.closed(s.id)
	}
	h.wg.Done()
}

// TasksReady wakes every session serving queue that has a free slot (the
// broker's TasksReady: the queue's ready count left 0). One
// whose slots are all taken could lease nothing; it wakes itself when a
// slot frees, and reads the ready counts then. Waking it anyway would have
// it read the counts of all its queues under the broker's lock for
// nothing, for each busy session of the queue, on every task that makes
// the queue ready.
func (h *Hub) TasksReady(queue string) {
	h.mu.RLock()
	h.wakeRoomLocked(queue)
	h.mu.RUnlock()
}

// wakeRoomLocked wakes the sessions of queue that have a free slot.
func (h *Hub) wakeRoomLocked(queue string) {
	for _, s := range h.byQueue[queue] {
		if s.hasRoom() {
			s.wake()
		}
	}
}

// unparkLocked wakes the sessions of queues with a free slot, under
// h.mu: those a newer session now outranks take back the slots they
// offered (park.go).
func (h *Hub) unparkLocked(queues []string) {
	for _, q := range queues {
		h.wakeRoomLocked(q)
	}
}

// LeaseLapsed tells the session that held a lease that the reaper took it
// back (the broker's LeaseLapsed). It runs under the broker's lock, so it
// only takes the hub's and the session's locks, which are never held
// while calling the broker.
func (h *Hub) LeaseLapsed(l broker.LapsedLease) {
	h.mu.RLock()
	s := h.sessions[l.SessionID]
	h.mu.RUnlock()
	if s != nil {
		s.leaseLapsed(l)
	}
}

// Start starts the registry's writer, if any: sessions register as their
// streams open.
func (h *Hub) Start(ctx context.Context) error {
	if h.registry != nil {
		return h.registry.Start(ctx)
	}
	return nil
}

// Stop ends every session, refuses new ones, and waits, bounded by ctx,
// until every session has unregistered; then it writes their ends to the
// registry, if any. It is idempotent.
func (h *Hub) Stop(ctx context.Context) error {
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

// RunningCanceled tells the session that holds a lease an operator
// canceled to stop the task (protocol §5.7); its Result still comes, and
// decides. A session not on this node is not found, and nothing happens:
// the node holding it hears of the cancel from the broker.
func (h *Hub) RunningCanceled(l broker.LapsedLease) {
	h.mu.RLock()
	s := h.sessions[l.SessionID]
	h.mu.RUnlock()
	if s != nil {
		s.cancelRunning(l.Lease)
	}
}

// closeAll ends every session, and every stream still waiting for its
// Hello, and refuses new ones.
func (h *Hub) closeAll() {
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

// Count is the number of live sessions.
func (h *Hub) Count() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.sessions)
}

// Load is what the live sessions hold, in all.
type Load struct {
	// Sessions is the number of live sessions.
	Sessions int
	// Slots sums their windows: each one's declared concurrency, capped at
	// Config.MaxSessionConcurrency (the slots the server may fill).
	Slots int
	// InFlight is the deliveries holding a slot.
	InFlight int
}

// Load sums the live sessions' windows and taken slots. It takes each
// session's lock in turn: for a scrape, not a hot path.
func (h *Hub) Load() Load {
	h.mu.RLock()
	defer h.mu.RUnlock()
	l := Load{Sessions: len(h.sessions)}
	for _, s := range h.sessions {
		s.mu.Lock()
		l.Slots += s.window
		l.InFlight += s.flight.slots
		s.mu.Unlock()
	}
	return l
}

// LateResults counts the Results dropped because their lease had lapsed
// or been reassigned: the reaper had already taken the task back.
func (h *Hub) LateResults() int64 { return h.lateResults.Load() }

// UnknownResults counts the Results for tasks the session does not hold
// (never held, or already answered: a repeated Result).
func (h *Hub) UnknownResults() int64 { return h.unknownResults.Load() }

// List snapshots the live sessions, ordered by id (for ListWorkers).
func (h *Hub) List() []Info {
	h.mu.RLock()
	out := make([]Info, 0, len(h.sessions))
	for _, s := range h.sessions {
		i := s.info()
		i.Draining = s.rel.ID != "" && h.releases[s.rel.ID].Draining
		out = append(out, i)
	}
	h.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Takes reports whether a live session serving queue, of a release not
// drained, can take tasks of kind k (whatever its room).
func (h *Hub) Takes(queue string, k broker.Kind) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, s := range h.byQueue[queue] {
		if s.route.Takes(k.Type, k.AtMostOnce) && !h.releases[s.rel.ID].Draining {
			return true
		}
	}
	return false
}

// loads snapshots the live sessions' loads, for the registry.
func (h *Hub) loads() []broker.SessionLoad {
	h.mu.RLock()
	out := make([]broker.SessionLoad, 0, len(h.sessions))
	for _, s := range h.sessions {
		s.mu.Lock()
		out = append(out, broker.SessionLoad{ID: s.id, InFlight: int32(s.flight.slots), LastHeartbeat: s.lastHeartbeat})
		s.mu.Unlock()
	}
	h.mu.RUnlock()
	for _, e := range h.extraInfos() {
		out = append(out, broker.SessionLoad{ID: e.ID, InFlight: e.InFlight, LastHeartbeat: e.LastHeartbeat})
	}
	return out
}

// SetExtraSessions has the registry list, beside the sessions, the
// consumers infos returns at each of its writes (the push endpoints this
// node invokes: none while it does not lead). Call it before Start.
func (h *Hub) SetExtraSessions(infos func() []broker.SessionInfo) { h.extras = infos }

func (h *Hub) extraInfos() []broker.SessionInfo {
	if h.extras == nil {
		return nil
	}
	return h.extras()
}

// registryInfo is the registry's record of the live session id.
func (h *Hub) registryInfo(id string) (broker.SessionInfo, bool) {
	h.mu.RLock()
	s := h.sessions[id]
	h.mu.RUnlock()
	if s != nil {
		return s.registryInfo(), true
	}
	for _, e := range h.extraInfos() {
		if e.ID == id {
			return e, true
		}
	}
	return broker.SessionInfo{}, false
}
