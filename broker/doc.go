// Package broker is the storage contract of Conveyor: the domain operations
// the server needs from a task store, with no engine types in them. The
// embedded bbolt engine lives in broker/bolt; every engine must pass the
// conformance suite in broker/brokertest.
//
// # Task state machine
//
//	            enqueue
//	               │
//	  ┌────────────┼───────────────┬──────────────┐
//	  ▼            ▼               ▼              ▼
//	SCHEDULED   PENDING ◀──┐   AGGREGATING     BLOCKED
//	  │  due       ▲ │     │
//	  └────────────┘ │lease│ RELEASED, lease lost with the stream,
//	                 ▼     │ server restart (no retry increment)
//	               ACTIVE ─┘
//	     SUCCESS ╱   │   ╲ RETRY (retries left) or lease expired
//	            ╱    │    ╲
//	   COMPLETED     │     RETRY ── due ──▶ PENDING
//	                 │ SKIP_RETRY, or RETRY with no retries left
//	                 ▼
//	              ARCHIVED
//
// SCHEDULED, PENDING, RETRY, AGGREGATING and BLOCKED tasks are "waiting";
// a waiting task whose expiry passes is archived instead of run. COMPLETED,
// ARCHIVED and CANCELED are terminal: the task is kept for its retention and
// then purged.
//
// # Decisions and mechanisms
//
// The broker applies decisions; it does not make them. The caller chooses
// a new task's initial state (NewTask.State), what an attempt leads to
// (a Decision built with Completed, Retrying, Archived or Released), what a
// lapsed lease leads to (the reaper's decisions, passed to Reclaim), how
// long a lease may be renewed (LeaseParams.LimitGrace) and how long terminal
// tasks are kept (PurgeParams). An engine keeps only what its own state
// forces: fencing, the expiry and deadline of waiting tasks, and the rule
// for a task canceled while it ran (Decision.Canceled).
//
// # Leases and fencing
//
// Lease hands a pending task to a worker session and returns a fencing token.
// Every later change made on behalf of that session (Complete, Extend,
// Progress, Release, Reclaim) names the token, and the broker applies it only
// while that lease is still the task's current one. A Result that arrives
// after its lease lapsed and the task was redelivered therefore fails with
// ErrLeaseLost instead of overwriting the newer attempt.
//
// # Durability
//
// Enqueue and EnqueueTx return only once the tasks are durable. Lease,
// Complete, Extend, Release and Progress return once the change is applied;
// the engine makes it durable shortly after (the bbolt engine in its next
// group commit), and never makes a later change durable before an earlier
// one. Losing such a change in a crash is always safe: the task is still
// leased or pending in the file, and a restart releases every leased task
// for redelivery.
//
// # Signals
//
// Engines push instead of being polled: Notifier.TasksReady wakes the
// dispatcher when a queue gains ready work, Notifier.TimersChanged wakes
// the timer loops when the earliest due time, lease expiry or purge time may
// have moved earlier, and Notifier.QueueRoom wakes the producers waiting
// for room in a queue that refused them for its bound (QueueConfig.MaxWaiting).
//
// # Bounded queues
//
// A queue's MaxWaiting bounds its tasks in the waiting states
// (Counts.Waiting). New tasks only are checked (QueueConfig.Admits), under
// the engine's lock, with the enqueues not durable yet counted: Enqueue
// refuses each task past the bound on its own, EnqueueTx and FireCron their
// whole call (ErrQueueFull, a *QueueFullError). Tasks coming back to the
// waiting states (retries, releases, lapses, RunTask, dependents released,
// group members) are never refused, even past the bound.
//
// # Rules
//
// A rule that decides what may run is a pure function of the contract,
// time passed in, which every engine applies (or mirrors, in SQL, with the
// function as its tests' oracle):
//   - Action.Applies: which states an operator's action applies to;
//   - Decision.Canceled: what a task canceled while it ran becomes;
//   - LeaseLimit: how long a lease may be renewed;
//   - QueueConfig.Admits and Room: a queue's bound on waiting tasks;
//   - QueueConfig.KeyAdmits and KeyStarts: a concurrency key's limit
//     (KeyLimit), when a keyed task enters the ready line and starts;
//   - QueueConfig.ActiveRoom and BatchSize: the cap on ACTIVE tasks, for
//     tasks alone and a fired group's batches;
//   - RateBucket: the rate limit, which also says when to wake a queue's
//     sessions (a time PromoteDue returns: no engine keeps a timer);
//   - GroupPolicy.Full and FiresAt: when a group fires, by size or bytes
//     and by time;
//   - DependencyOutcome: what a dependency's end means for its dependent
//     under each OnFailure policy;
//   - ExpiryOf, Expired and ExpiryMessage: a waiting task past its expiry
//     or deadline is archived, not run;
//   - UniqueHolds: when a unique key's claim lapses.
//
// An engine keeps the state the rules read and applies their answers.
//
// # Concurrency
//
// Every method is atomic: a change is all applied or not at all, and two
// calls never see each other half done. What an engine serializes is its
// own business, with one guarantee: the calls that change one task are
// applied in one order, and each reads the task as the one before left it
// (a lease's token fences the rest). The bbolt engine decides every change
// under one mutex; the PostgreSQL engine under row locks (a task's row, a
// concurrency key's, a group's, a queue's), in transactions.
//
// The signals are hints, never commands: a session woken by TasksReady may
// find the work gone (another session took it), and one not woken finds
// it at its next round. Ready and ReadyGroups are hints of the same kind.
// A signal may be sent while the engine holds its own locks, so a Notifier
// must return at once and must not call back into the broker; the one
// signal whose timing the contract promises is LeaseLapsed, sent before
// the reclaimed task can be leased again. Signals are node-local: an
// engine tells its own server of the changes it makes.
//
// An engine that is a LeaseParker leases in an enqueue's transaction to
// the slots a session offered (ParkedLease). The slots change hands under
// the ParkedLease's own lock only: the engine claims open slots before
// the transaction and settles each claim once it ended, outside its
// locks; the session offers and collects from its send loop. A claim's
// leases follow every rule of Lease, and its settle, like a signal, only
// wakes the session.
//
// # Several nodes
//
// An engine several server processes (nodes) share implements Clustered.
// Its contract with them:
//
//   - Leases belong to nodes. Each node's LapsedLeases lists the leases of
//     its own sessions only (the session is on that node, and is told by
//     LeaseLapsed). The tasks held by a node that died (its heartbeat
//     lapsed) go back to PENDING with no retry counted, by the leader.
//   - One node at a time leads, under a term no other node holds; the
//     server runs Purge and the cron fires only there, and PromoteDue
//     promotes only there (elsewhere it wakes the node's sessions whose
//     rate bucket refilled). Each of them is safe to run twice; only the
//     sweep of dead nodes is fenced by the term.
//   - What decides what may run is in the database: a lease, a
//     concurrency key, a unique key, a dependency, a group and the caps
//     hold across nodes.
//   - Ready, ReadyGroups, Queues and the signals are this node's hints,
//     fed by its own commits and by the other nodes' notifications: a
//     change made on another node reaches them after a delay, and Ready
//     may count a task another node is leasing (the lease then takes
//     fewer). A running task canceled through another node is announced
//     with RunningCanceler.
package broker
