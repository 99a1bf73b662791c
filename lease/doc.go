// Package lease holds Conveyor's lease rules: how long a dispatched task's
// lease lives (DefaultTTL), how often a worker must heartbeat, how long an
// attempt with a deadline or timeout may keep its lease (Bound, Limit,
// DefaultLimitGrace), what deadline a Dispatch carries (DispatchDeadline:
// not the task's deadline, which is one of its inputs), and the reaper
// that reclaims lapsed leases.
//
// # Lifecycle of a lease
//
//	Lease (dispatch) ──▶ held ──Heartbeat──▶ held (expiry = now + TTL)
//	                       │
//	       ┌───────────────┼────────────────────┬─────────────────────┐
//	       ▼               ▼                    ▼                     ▼
//	   Result         stream closes        expiry passes        server restarts
//	 (outcome)     (released at once,    (reaper: retried+1,    (released, no
//	                no retry increment)   Cancel to the old      retry increment)
//	                                      session, redelivered)
//
// Every lease carries a fencing token: a Result, Heartbeat or Progress
// names the task, the session maps it to the token it was dispatched with,
// and the broker applies the change only if that token is still the task's
// current lease. A Result that arrives after the reaper took the task back
// is dropped (logged and counted), never applied on top of the redelivery.
//
// The reaper is timer-driven: it sleeps until the earliest lease expiry the
// broker reports and is woken early when an earlier one appears. It asks the
// broker which leases lapsed, decides each with scheduler.Retrier.AfterLapse
// (a lapse counts a retry; with none left the task is archived) and hands
// the decisions to Broker.Reclaim, which tells each session of its lapse
// before the task can be leased again.
package lease
