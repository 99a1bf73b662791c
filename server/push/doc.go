// Package push invokes the queues' HTTP push endpoints (docs/push.md): a
// queue whose configuration names an endpoint gets one more consumer
// beside its sessions, with its own credit (the endpoint's concurrency).
// It leases the queue's tasks as a session does, so priorities, caps,
// keys and rate limits apply alike, and sends each one as a signed POST
// whose answer it classifies: only a 2xx PushResponse with an outcome
// proves what the handler did; anything else counts as a failed attempt.
//
// It owns the endpoint's settings and their rules (endpoint.go), the
// Standard Webhooks signatures (signature.go), the consumer of one queue
// (consumer.go: credit, leasing, waking), one invocation and what its
// answer proves (invoke.go, classify.go), and the Pool (pool.go), the
// server's face: it keeps one consumer per configured queue, hears the
// broker's signals (ready work, lapsed leases, canceled tasks) and lists
// the endpoints for ListWorkers.
//
// # Caveats
//
// LeaseLapsed and RunningCanceled run under the broker's lock: they take
// only the pool's and the consumers' locks, never held while calling the
// broker. On an engine several nodes share, only the leading node pushes,
// so an endpoint's concurrency holds across the cluster.
package push
