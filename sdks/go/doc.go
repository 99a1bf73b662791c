// Package conveyor is the Go SDK for Conveyor: a Client that enqueues and
// looks up tasks, a Worker that holds a session with the server and runs
// handlers for the tasks it is sent, and an Inspector that operates the
// server as the CLI and the dashboard do.
//
// Both speak ConnectRPC to a server address. Plain http:// addresses use
// HTTP/2 without TLS (h2c); https:// addresses negotiate HTTP/2 over TLS.
// The gRPC protocol is the default; WithProtocol selects gRPC-Web or the
// Connect protocol (HTTP/JSON-friendly) for the Client. A Worker's session
// is a bidirectional stream and needs gRPC or Connect.
//
// # Several servers
//
// An address may name several servers of one service (Conveyor nodes on
// one PostgreSQL database, reached without a load balancer), separated by
// commas: "http://node1:7420,http://node2:7420". NewClient and NewWorker
// check each URL (an http:// or https:// URL with a host; schemes may
// differ) and refuse an empty entry or a server named twice, naming the
// URL at fault.
//
// A Client sends its calls to one server at a time, the first one first.
// A call moves on to the next server, in turn, when the one in use cannot
// have acted on it: the connection could not be made (refused,
// unreachable, a name that does not resolve), or the server answered
// unavailable (it is shutting down or cannot reach its storage, and
// changed nothing). It is tried at most once per server, while its
// context lasts; the server that answered stays in use for the calls
// after. A call whose outcome is unknown, cut short by a transport error
// (code unavailable, or a connection reset) once its request may have
// reached the server, moves on only when repeating it is harmless:
// GetTask, and Enqueue, EnqueueBatch and EnqueueTx whose every task
// carries a TaskID (a repeat of a stored task id gets ErrAlreadyExists
// from Enqueue and EnqueueBatch, and the stored task from EnqueueTx).
// Other calls in doubt return their error, as with one server: enqueue
// with a TaskID to retry them safely. A unique key does not make an
// enqueue repeatable, as it lapses once its task completes. No other
// error moves a call. Enqueue batching is unchanged: a shared EnqueueBatch
// moves on as its tasks allow.
//
// A Worker holds one session at a time. Its first session goes to the
// first server; each time a session cannot be opened or ends (a broken
// stream, a server shutting down), the next one goes to the next server
// in turn. The servers of a round are tried one after another at once;
// the reconnect backoff is waited between rounds, and after a session
// that was established (which also resets it).
//
// # Producing
//
// NewClient, then Enqueue (or EnqueueJSON for a typed payload) with task
// options such as Queue, ProcessIn, Unique and MaxRetry. EnqueueBatch
// stores up to 1000 tasks with a result per task; EnqueueTx stores them all
// or none.
//
// Concurrent Enqueue calls share RPCs: a call made while the Client has an
// enqueue RPC out waits for it to return and then leaves together with the
// other calls that gathered meanwhile, as one EnqueueBatch, while a call
// made when none is out leaves at once. Each call still gets its own task
// or its own error, as from an RPC of its own. WithEnqueueBatching(false)
// turns this off; WithEnqueueInFlight sets how many RPCs may be out.
//
// # Typed kinds
//
// A payload type may name its task type by implementing Kind (a Kind()
// method returning a constant), and carry default options by implementing
// KindWithOptions. EnqueueKind then enqueues it as JSON under that type,
// its defaults first and the call's options after, and HandleKind
// registers a handler for it, decoding as HandleJSON does: the type string
// lives in one place, bound to the struct. NewKindTask builds such a task
// for EnqueueBatch and EnqueueTx, and KindOf names a kind's type.
//
// # Inspecting
//
// NewInspector takes the address and the connection options of a Client
// and speaks the server's AdminService. Its methods return the SDK's
// types (TaskInfo, QueueInfo, QueueConfig, CronEntry, GroupInfo,
// WorkerInfo, ReleaseInfo, ClusterInfo, BrokerInfo) and errors (an *Error
// that errors.Is matches against ErrNotFound, ErrInvalidArgument and the
// others; an action the state refuses has code failed_precondition):
//
//   - tasks: GetTask, ListTasks (a page, with filters) and AllTasks (an
//     iterator over every page); CancelTask, RunTask, ArchiveTask and
//     DeleteTask by id; their Batch forms over up to 1000 ids, with a
//     result per id; BulkTasks over every task of a queue in one state,
//     run by the server in chunks, with its progress;
//   - queues: ListQueues, GetQueue, PauseQueue, ResumeQueue, DeleteQueue,
//     GetQueueConfig (effective), GetStoredQueueConfig (as stored) and
//     UpdateQueueConfig, which changes only the QueueSettings it names,
//     in one step on the server;
//   - cron: CreateCron, GetCron, ListCrons, UpdateCron (by CronField, as
//     UpdateQueueConfig), PauseCron, ResumeCron, DeleteCron;
//   - the rest: ListGroups, ListWorkers, ListReleases, DrainRelease,
//     GetClusterInfo, GetBrokerInfo.
//
// Given several servers, an Inspector moves a call on to the next as a
// Client does; see NewInspector for which calls are repeated when their
// outcome is unknown.
//
// # Working
//
// NewWorker with the queues it serves (WithQueue, with a weight each) and
// its concurrency (WithConcurrency), register handlers with Handle,
// HandleFunc or HandleJSON, then Run. A handler's return value is its
// outcome: nil completes the task, SkipRetry(err) archives it at once, any
// other error (or a panic) retries it with backoff. The handler's context
// ends at the task's deadline or timeout, on a Cancel from the server, or
// when the worker stops. The Worker heartbeats every running task, reports
// progress (Delivery.Progress), reconnects with jittered backoff after a
// transient failure, and on shutdown drains: running tasks get a grace
// period to finish, and those that cannot are handed back un-penalized
// (RELEASED) rather than retried.
//
// When a session is lost, its handlers' contexts are canceled (cause
// ErrSessionLost) and their results dropped: the server has already given
// their tasks back. A handler that ignores that and runs on still holds
// one of the Worker's concurrency slots, so the Worker's next session
// declares that much less concurrency, keeping the promise that it can run
// every task the server sends it; while such handlers hold every slot, the
// Worker waits for one to return before it reconnects. Capacity a returning
// handler frees comes back with the session after.
//
// Each session's Hello lists the task types the Worker has handlers for,
// and the server sends it tasks of those types only; a task no live worker
// can take waits. It also names the Worker's release (WithReleaseID, or
// else the environment variable CONVEYOR_RELEASE_ID), an opaque id such
// as a build id: new work goes to the newest release the server has seen
// that can take it, so a deploy shifts work to the new code as its
// workers connect, and an operator can drain an old release
// (AdminService.DrainRelease) to stop its workers taking new work. A
// Worker with no release id is unversioned and ranks below every release.
//
// A task's Deadline option is a time on the server's clock. The Worker
// takes it as the time left when the server dispatched the task, counted
// from the receipt on its own clock, so a worker clock ahead of the
// server's or behind it moves no handler's deadline. The server's clock is
// read from the dispatches; a task that still
// seems past its deadline on arrival is failed (retried with backoff, and
// archived once the server's clock passes the deadline) rather than handed
// back to be sent straight back.
//
// The Worker checks what it sends against the server's bounds first, so
// that one task cannot cost the session: a result over MaxResultBytes
// (1 MiB) fails that attempt (RETRY) instead of being sent, and error and
// progress messages longer than MaxErrorMessageBytes (16 KiB) and
// MaxProgressMessageBytes (1 KiB) are cut, marked " … [truncated]". A
// batch's results that together pass the 32 MiB a frame may carry are
// sent while they fit; each member after that fails its attempt (RETRY)
// and comes back alone.
//
// # At most once
//
// Delivery is at least once: a task may run again after a crash, a lost
// connection or a lapsed lease, so handlers should be idempotent. A task
// that must never run twice (a payment, an e-mail) is enqueued with
// AtMostOnce. The Worker then asks the server before it runs it (a Start),
// and runs the handler only once the server has durably committed the
// start; if the server refuses (the lease lapsed, the task was canceled),
// the handler does not run. Should the outcome of a started attempt be
// lost, the server does not run the task again: it archives it with a last
// error beginning "outcome unknown:", for an operator to decide. An
// attempt that ends with an outcome is handled as for any task, so an
// error is retried (return SkipRetry to archive it instead). A handler
// sees Delivery.Options.AtMostOnce; it needs nothing else. Push endpoints
// are never given such tasks.
//
// # Push endpoints
//
// A queue's configuration may name a push endpoint (QueueConfig.push): the
// server then POSTs each of its tasks to that URL, beside or instead of
// any session, and the endpoint's answer is the attempt's result. Such an
// endpoint suits serverless platforms that scale on HTTP requests.
// Worker.PushHandler is one: an http.Handler that runs the same handlers,
// with the same middleware and the same outcomes, as Run does over a
// session, so moving a queue to push changes no handler. A Worker made by
// NewPushWorker has no server address and serves push only; one made by
// NewWorker may serve both, each task coming by one way or the other.
// Neither mode ever falls back on the other.
//
// Each request is signed as Standard Webhooks sign theirs (webhook-id,
// webhook-timestamp, webhook-signature: an HMAC-SHA256 under a secret
// shared with the server, written whsec_<base64>). The handler verifies
// the signature under its secrets (WithPushSecrets, or else
// CONVEYOR_PUSH_SECRET, comma-separated; several at once for a rotation),
// refuses a timestamp more than 5 minutes off (WithPushTolerance) and a
// request id it accepted before (a replay), all before it parses the body.
// A server with no secret sends unsigned requests to loopback endpoints
// only; an endpoint takes them in WithPushDevelopmentMode, and without a
// secret or that mode PushHandler refuses to build. Refusals are plain
// text with 405, 413, 401, 409 or 400 (see PushHandler); a task whose
// handler ran is answered 200 with its PushResponse.
//
// A pushed handler's context ends at the PushRequest's deadline (a time on
// the server's clock) or when the server aborts the request. Push carries
// no progress: Delivery.Progress does nothing there. The conformance push
// worker, go run ./sdks/go/conformance/pushworker, serves the conformance
// task types this way (see its package doc).
//
// # Tracing
//
// The conveyorotel subpackage traces each task with OpenTelemetry, from
// Enqueue (a Client option) to its handler (a worker Middleware), through
// the task's metadata. It is built on two extension points any other
// instrumentation can use too: WithEnqueueHook on the producer and
// Worker.Use on the worker.
//
// # Testing
//
// The conveyortest subpackage serves the tests of code that uses Conveyor:
// a real server in the test's process on a temporary bbolt file (Start),
// assertions on what it holds (RequireEnqueued, RequireNotEnqueued), a
// handler run on one task with the outcome a Worker would report
// (RunTask), and a Worker run until the waiting tasks are worked
// (DrainOnce). It imports the server's packages; import it from tests.
//
// The SDK imports only the generated API, connect and protobuf: never the
// server's packages, nor OpenTelemetry unless conveyorotel is imported.
package conveyor
