package conveyor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
)

// Worker defaults.
const (
	// DefaultWorkerConcurrency is how many tasks a Worker runs at once
	// unless WithConcurrency says otherwise.
	DefaultWorkerConcurrency = 10
	// DefaultDrainGrace is how long a stopping Worker lets running handlers
	// finish before it cancels them (see WithDrainGrace).
	DefaultDrainGrace = 30 * time.Second
	// DefaultProgressInterval is the shortest gap between two progress
	// updates of one task (see WithProgressInterval).
	DefaultProgressInterval = time.Second
)

// Fixed bounds of a stop, after the drain grace.
const (
	// drainUnwind is how long handlers canceled at the end of the drain
	// grace get to return and report RELEASED before the stream closes
	// anyway (the server then releases their leases itself).
	drainUnwind = 5 * time.Second
	// closeWait is how long the worker waits for the server to end the
	// stream after the worker closed its side.
	closeWait = 5 * time.Second
	// handshakeTimeout bounds the wait for Welcome after Hello.
	handshakeTimeout = 30 * time.Second
	// workerDefaultQueue is served when no queue is configured.
	workerDefaultQueue = "default"
)

// Worker holds a session with a Conveyor server and runs handlers for the
// tasks the server dispatches to it. Register handlers with Handle,
// HandleFunc or HandleJSON, then call Run.
//
// A Worker runs at most its concurrency of handlers at once; the server
// never has more than that many tasks out to it. A handler that ignores
// its canceled context after a lost session still holds its slot: sessions
// opened while it runs declare that much less concurrency (and while such
// handlers hold every slot, the Worker waits for one to return before it
// reconnects). It heartbeats every task
// it holds, reconnects with jittered backoff when the session breaks, and
// stops gracefully (see Run). Delivery is at least once: a task may run
// again after a crash, a lost connection or a lapsed lease. A task
// enqueued with AtMostOnce is the exception: the Worker asks the server
// before it runs one, and runs it only once the server has committed the
// start; should that attempt's outcome be lost, the server archives the
// task rather than run it again.
//
// Each session's Hello tells the server the task types the Worker has
// handlers for, so that it is sent only those, and its release
// (WithReleaseID), so that new work goes to the newest release.
type Worker struct {
	cfg  workerConfig
	log  *slog.Logger
	conn *connConfig
	// servers are the servers the Worker may hold its session with, in
	// the order it tries them (see loop).
	servers []sessionServer

	mu            sync.RWMutex
	handlers      map[string]Handler
	batchHandlers map[string]BatchHandler
	middleware    []Middleware
	// periodic are the cron entries the worker declares (periodic.go).
	periodic []periodicJob

	// orphans counts the handlers still running from sessions that ended
	// (see capacity.go); orphanGone is closed, and replaced, whenever one
	// returns.
	orphanMu   sync.Mutex
	orphans    int
	orphanGone chan struct{}
	// running counts the goroutines of every execution.
	running sync.WaitGroup
	// lastTurn is the turn of the latest dispatched execution: executions
	// try for a slot one after another, in dispatch order.
	turnMu   sync.Mutex
	lastTurn chan struct{}

	// wallSkew is added to the wall clock where it is compared with the
	// server's: zero, but in tests of a worker clock ahead of the server's.
	wallSkew time.Duration

	runMu   sync.Mutex
	started bool

	stopCh                          chan struct{} // closed to drain and stop
	abandonCh                       chan struct{} // closed to cut the drain short (Shutdown's ctx ended)
	killCh                          chan struct{} // closed to stop at once (Close)
	doneCh                          chan struct{} // closed when Run returns
	stopOnce, abandonOnce, killOnce sync.Once
}

// NewWorker returns a Worker for the server at addr (an http:// or https://
// URL; plain http uses HTTP/2 without TLS). It takes WorkerOptions and the
// connection Options. The session needs the gRPC protocol (the default) or
// the Connect protocol: ProtocolGRPCWeb cannot carry it.
//
// addr may name several servers of one service, separated by commas, as
// for NewClient: "http://a:7420,http://b:7420". The Worker holds one
// session at a time, with the first server first; each time a session
// cannot be opened or ends (a broken stream, a server going away), the
// next one goes to the next server in turn. The servers of a round are
// tried at once, one after another, and the reconnect backoff
// (WithReconnectBackoff) is waited between rounds, and after a session
// that was established.
func NewWorker(addr string, opts ...WorkerOption) (*Worker, error) {
	return newWorker(&addr, opts)
}

// NewPushWorker returns a Worker that serves push endpoints only: it runs
// its handlers for the HTTP requests of a server that pushes to it (see
// PushHandler) and has no server address, so it never opens a session (Run
// returns an error). Of the options, only WithLogger matters to it. A
// Worker made by NewWorker can serve push too, beside its session.
func NewPushWorker(opts ...WorkerOption) (*Worker, error) {
	return newWorker(nil, opts)
}

// newWorker makes a Worker for the server at *addr, or with no server
// (push only) for a nil addr.
func newWorker(addr *string, opts []WorkerOption) (*Worker, error) {
	cfg := workerConfig{
		concurrency:      DefaultWorkerConcurrency,
		drainGrace:       DefaultDrainGrace,
		progressInterval: DefaultProgressInterval,
		backoff:          backoff{base: DefaultReconnectBase, max: DefaultReconnectMax},
	}
	for _, o := range opts {
		if o != nil {
			o.applyToWorker(&cfg)
		}
	}
	if len(cfg.queues) == 0 {
		cfg.queues = map[string]int32{workerDefaultQueue: 1}
	}
	cfg.labels = withProcessLabels(cfg.labels)
	switch {
	case cfg.releaseSet:
		cfg.checkReleaseID("release id")
	case addr != nil:
		cfg.releaseID = os.Getenv(EnvReleaseID)
		cfg.checkReleaseID(EnvReleaseID)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.queues)) {
		if !validQueueName(name) {
			cfg.errorf("queue name %q is invalid: it must match ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$ (at most %d bytes)",
				truncateName(name), maxNameBytes)
		}
		if w := cfg.queues[name]; w <= 0 {
			cfg.errorf("queue %q: weight must be > 0, got %d", name, w)
		}
	}
	if len(cfg.errs) > 0 {
		return nil, errors.Join(cfg.errs...)
	}
	conn, endpoints, err := workerConn(addr, cfg.connOpts)
	if err != nil {
		return nil, err
	}
	if conn.protocol == ProtocolGRPCWeb {
		return nil, errors.New("conveyor: a worker session is a bidirectional stream, which gRPC-Web cannot carry: use ProtocolGRPC or ProtocolConnect")
	}
	return &Worker{
		cfg:           cfg,
		log:           conn.logger,
		conn:          conn,
		servers:       sessionServers(conn, endpoints),
		handlers:      map[string]Handler{},
		batchHandlers: map[string]BatchHandler{},
		orphanGone:    make(chan struct{}),
		lastTurn:      closedChan(),
		stopCh:        make(chan struct{}),
		abandonCh:     make(chan struct{}),
		killCh:        make(chan struct{}),
		doneCh:        make(chan struct{}),
	}, nil
}

// workerConn is the connection configuration of a Worker for *addr. A nil
// addr names no server: the Worker serves push endpoints only (see
// PushHandler), and only the logger of the options is used.
func workerConn(addr *string, opts []Option) (*connConfig, []endpoint, error) {
	if addr != nil {
		return newConnConfig(*addr, opts)
	}
	c := &connConfig{}
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
	if len(c.errs) > 0 {
		return nil, nil, errors.Join(c.errs...)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	return c, nil, nil
}

// errNoServer is Run's error on a Worker made with no server address.
var errNoServer = errors.New("conveyor: the worker has no server address: a Worker made by NewPushWorker serves push endpoints only (see PushHandler)")

// sessionServer is one server a Worker may hold its session with.
type sessionServer struct {
	url    string
	client conveyorv1connect.WorkerServiceClient
	// admin declares the periodic jobs (periodic.go).
	admin adminClient
}

// sessionServers are the session clients of endpoints, in order.
func sessionServers(conn *connConfig, endpoints []endpoint) []sessionServer {
	servers := make([]sessionServer, len(endpoints))
	for i, e := range endpoints {
		servers[i] = sessionServer{url: e.url,
			client: conveyorv1connect.NewWorkerServiceClient(sessionClient(e.http), e.url, conn.connectOptions()...),
			admin:  conveyorv1connect.NewAdminServiceClient(e.http, e.url, conn.connectOptions()...)}
	}
	return servers
}

func closedChan() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

// Handle registers h for tasks of taskType. It panics if taskType is empty,
// not valid UTF-8 or over 1,024 bytes (no task can have such a type), if h
// is nil, or if taskType already has a handler (as http.ServeMux does).
// Register handlers before Run: every session's Hello lists the types that
// have one, and the server sends the Worker tasks of those types only. (A
// server older than that routing may send others: such a task is failed
// with ErrNoHandler, to be retried.)
func (w *Worker) Handle(taskType string, h Handler) {
	if taskType == "" {
		panic("conveyor: Handle with an empty task type")
	}
	if h == nil {
		panic("conveyor: Handle with a nil handler for " + taskType)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checkNewTypeLocked(taskType)
	w.handlers[taskType] = h
}

func (w *Worker) checkNewTypeLocked(taskType string) {
	// Every type is listed in the Hello, which could not be encoded (and
	// the Worker would retry the session forever) with one that is not
	// UTF-8. No task can have such a type, nor one longer than the
	// server's bound.
	if !utf8.ValidString(taskType) || len(taskType) > maxNameBytes {
		panic(fmt.Sprintf("conveyor: task type %q is not valid UTF-8 or is over %d bytes: no task can have it",
			truncateName(taskType), maxNameBytes))
	}
	_, dup := w.handlers[taskType]
	_, dupBatch := w.batchHandlers[taskType]
	if dup || dupBatch {
		panic("conveyor: a handler for task type " + taskType + " is already registered")
	}
}

// HandleBatch registers h for tasks of taskType delivered in batches
// (aggregation groups, protocol §5.11). The Worker then advertises the type
// in Hello.batch_types, and the server delivers a fired group of that type
// as one batch: it takes one concurrency slot, every member's lease is
// heartbeated, and each member gets its own result. A member that comes
// back alone (after a retry or a release) is handed to h as a batch of one.
// Middleware (Use) does not wrap batch handlers. Batch members' Progress
// is not reported. It panics as Handle does.
func (w *Worker) HandleBatch(taskType string, h BatchHandler) {
	if taskType == "" {
		panic("conveyor: HandleBatch with an empty task type")
	}
	if h == nil {
		panic("conveyor: HandleBatch with a nil handler for " + taskType)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checkNewTypeLocked(taskType)
	w.batchHandlers[taskType] = h
}

// batchHandlerFor returns the batch handler for taskType, or nil.
func (w *Worker) batchHandlerFor(taskType string) BatchHandler {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.batchHandlers[taskType]
}

// batchTypes lists the types with a batch handler, sorted.
func (w *Worker) batchTypes() []string {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return slices.Sorted(maps.Keys(w.batchHandlers))
}

// handledTypes lists every type with a handler, plain or batch, sorted:
// the Hello's types, so that the server sends this Worker only tasks it
// has a handler for. The Worker has no catch-all handler (a type without
// one is answered by ErrNoHandler), so the list is never "every type".
func (w *Worker) handledTypes() []string {
	w.mu.RLock()
	defer w.mu.RUnlock()
	types := slices.Collect(maps.Keys(w.handlers))
	types = slices.AppendSeq(types, maps.Keys(w.batchHandlers))
	slices.Sort(types)
	return slices.Compact(types)
}

// HandleFunc registers fn for tasks of taskType; see Handle.
func (w *Worker) HandleFunc(taskType string, fn func(ctx context.Context, d *Delivery) error) {
	if fn == nil {
		panic("conveyor: HandleFunc with a nil function for " + taskType)
	}
	w.Handle(taskType, HandlerFunc(fn))
}

// Use appends middleware around every handler, including the one that
// answers unknown task types. The first middleware added is the outermost.
// Panics are recovered outside all middleware.
func (w *Worker) Use(mw ...Middleware) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range mw {
		if m != nil {
			w.middleware = append(w.middleware, m)
		}
	}
}

// handlerFor returns the handler for taskType wrapped in the middleware.
func (w *Worker) handlerFor(taskType string) Handler {
	w.mu.RLock()
	h, ok := w.handlers[taskType]
	mws := w.middleware
	w.mu.RUnlock()
	if !ok {
		h = noHandler{}
	}
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

// Run connects to the server and runs handlers until ctx is canceled or
// Shutdown or Close is called, reconnecting whenever the session breaks.
// It returns nil after a stop, or the error that ended the session when
// that error is fatal (protocol §4): unauthenticated or permission_denied
// (fix the token), or invalid_argument (the server refused the Hello, such
// as a version requirement; reconnecting would not help). The error wraps
// the *connect.Error: test it with connect.CodeOf.
//
// Canceling ctx stops the Worker gracefully, as Shutdown does with no
// bound of its own: it starts no new tasks, lets running handlers finish
// within the drain grace (WithDrainGrace), reports RELEASED for those it
// then abandons, closes the stream and returns once the server has ended
// it. Handlers get a context that carries ctx's values but not its
// cancellation.
//
// Run may be called once.
func (w *Worker) Run(ctx context.Context) error {
	w.runMu.Lock()
	if w.started {
		w.runMu.Unlock()
		return errors.New("conveyor: Worker.Run called twice")
	}
	w.started = true
	w.runMu.Unlock()
	defer close(w.doneCh)
	if len(w.servers) == 0 {
		return errNoServer
	}

	w.mu.RLock()
	n := len(w.handlers) + len(w.batchHandlers)
	w.mu.RUnlock()
	if n == 0 {
		return errors.New("conveyor: the worker has no handlers: register some with Handle before Run")
	}
	if err := w.declarePeriodic(ctx); err != nil {
		return err
	}
	stopOnCancel := context.AfterFunc(ctx, w.requestStop)
	defer stopOnCancel()
	base, cancelBase := context.WithCancelCause(context.WithoutCancel(ctx))
	err := w.loop(base)
	cancelBase(ErrSessionLost)
	w.waitHandlers(drainUnwind)
	w.conn.closeIdleConnections()
	return err
}

// loop runs sessions until a stop or a fatal error.
//
// Sessions go to the servers in turn: the first session to the first
// server, and each one after to the server after the last one's, whatever
// ended that one (a broken stream, a server that went away, a refused
// Hello). The protocol's backoff (§5.9) paces rounds, not servers: the
// servers of a round are tried one after another at once, and a round
// that got no session waits delay(r) before the next, r counting such
// rounds. A session that was established (Welcome) resets r, and its end
// begins a round after delay(0), so that the workers of a server that
// went away spread over the others. With one server, every round is one
// attempt, and this is the protocol's backoff as it stands.
func (w *Worker) loop(base context.Context) error {
	n := len(w.servers)
	server := 0 // the server of the next session
	tried := 0  // sessions tried in the current round
	failed := 0 // rounds without a session since the last one established
	for {
		if w.stopping() {
			return nil
		}
		srv := w.servers[server]
		established, err := w.runSession(base, srv)
		if w.stopping() {
			return nil
		}
		if isFatalSessionError(err) {
			w.log.Error("worker session refused; not reconnecting", "server", srv.url, "err", err)
			return fmt.Errorf("conveyor: worker session with %s: %w", srv.url, wrapError(err))
		}
		server = (server + 1) % n
		tried++
		if established {
			failed, tried = 0, n
		}
		if tried < n {
			w.log.Warn("worker session ended; trying the next server", "server", srv.url, "err", err,
				"next", w.servers[server].url)
			continue
		}
		tried = 0
		delay := w.cfg.backoff.delay(failed)
		failed++
		w.log.Warn("worker session ended; reconnecting", "server", srv.url, "err", err, "attempt", failed,
			"delay", delay, "next", w.servers[server].url)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-w.stopCh:
			t.Stop()
			return nil
		}
	}
}

// isFatalSessionError classifies a session's end (protocol §4): a bad
// token or a refused Hello is fatal; anything else, including a clean end,
// is transient.
func isFatalSessionError(err error) bool {
	if err == nil {
		return false
	}
	switch connect.CodeOf(err) {
	case connect.CodeUnauthenticated, connect.CodePermissionDenied, connect.CodeInvalidArgument:
		return true
	}
	return false
}

func (w *Worker) stopping() bool {
	select {
	case <-w.stopCh:
		return true
	default:
		return false
	}
}

func (w *Worker) requestStop() { w.stopOnce.Do(func() { close(w.stopCh) }) }

// Shutdown stops the Worker gracefully, as canceling Run's context does,
// and waits for Run to return. If ctx ends first, the drain is cut short:
// running handlers are canceled at once (cause ErrWorkerShutdown) and, as
// at the end of the drain grace, are reported RELEASED (or with their real
// outcome, if they finished) if they return within 5 seconds; the stream
// is then closed, and Shutdown returns ctx's error once Run has returned.
// Shutdown is safe to call more than once and before or without Run.
func (w *Worker) Shutdown(ctx context.Context) error {
	w.requestStop()
	if !w.wasStarted() {
		return nil
	}
	select {
	case <-w.doneCh:
		return nil
	case <-ctx.Done():
		w.abandonOnce.Do(func() { close(w.abandonCh) })
		<-w.doneCh
		return ctx.Err()
	}
}

// Close stops the Worker at once, without draining: the stream is cut and
// every handler's context is canceled with cause ErrSessionLost; no
// results are sent. The server releases the tasks' leases (no retry
// counted) and redelivers them, so running tasks may run twice. It waits
// for Run to return, and is safe to call more than once.
func (w *Worker) Close() error {
	w.killOnce.Do(func() { close(w.killCh) })
	w.requestStop()
	if w.wasStarted() {
		<-w.doneCh
	}
	return nil
}

func (w *Worker) wasStarted() bool {
	w.runMu.Lock()
	defer w.runMu.Unlock()
	return w.started
}

// waitHandlers waits up to d for every execution goroutine to return. A
// handler that ignores its canceled context is left behind, and logged.
func (w *Worker) waitHandlers(d time.Duration) {
	done := make(chan struct{})
	go func() {
		w.running.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		w.log.Warn("handlers still running after their context was canceled; leaving them behind", "waited", d)
	}
}
