// Package sessions serves the worker sessions: one bidirectional stream
// per worker (protocol §5), the tasks it is sent and the answers it owes.
//
// It owns the session (session.go: the receive loop; session_send.go: the
// send loop, the only writer of the stream; session_complete.go: the
// Results applied in batches), the bookkeeping of what a worker holds
// and owes (inflight.go: flow control, the reclaim of a lapsed slot,
// matching answers to deliveries), how a session's free slots are shared
// across its queues (dispatch_plan.go, picker.go), the bounds on a worker
// frame checked before it is decoded (frame_bounds.go), the handshake
// (serve.go), one write per burst of frames (flush.go) and, on an engine
// several nodes share, the record of this node's sessions in the engine's
// session registry, for every node's ListWorkers (session_registry.go:
// opens and closes queued, loads written every few seconds, never waited
// for by a session). The Hub
// (hub.go) is its face: the server constructs one (NewHub) with the
// broker, the session settings (Config), the retry rule and what the
// sessions record (Metrics), and hands it each WorkerService.Session
// stream (Serve).
//
// # What enters it
//
// Everything from outside that concerns a live session enters through
// the Hub's methods, in one place:
//   - the broker's signals, forwarded by the server's notifier:
//     TasksReady (a queue's ready count left 0: wake its sessions with a
//     free slot), LeaseLapsed (the reaper took a lease back: tell the
//     worker to cancel, keep the slot until it answers or the reclaim
//     window passes) and RunningCanceled (an operator canceled a running
//     task, on this node or through another: tell the worker to stop it);
//   - an operator's cancel on this node (RunningCanceled too, from the
//     admin service);
//   - reads for the admin service and monitoring: List (ListWorkers),
//     AttemptID (a lease's attempt id in task views), Count, Load,
//     LateResults and UnknownResults (Stats and /metrics);
//   - the lifecycle: Start (the registry's writer, if any), and Stop,
//     which ends every session (their leases released at once, no retry
//     increment), refuses new ones and writes their ends to the registry.
//
// # Caveats
//
// LeaseLapsed runs under the broker's lock: it and everything it calls
// (Metrics.LeaseLapsed included) take only the hub's and the sessions'
// locks, which are never held while calling the broker. A session's
// leases are released when it ends, whatever the reason; its Results
// already received are applied even so, and its stream ends only after
// they are recorded.
package sessions
