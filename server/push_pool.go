package server

import (
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/scheduler"
	"github.com/conveyor-dev/conveyor/server/push"
)

// pushRefreshEvery is how often a node of a shared engine reads the push
// endpoints again, to learn of a change made through another node.
const pushRefreshEvery = 5 * time.Second

// newPushPool is the consumer of the queues' push endpoints. On an engine
// several nodes share, only the leader pushes (so that an endpoint's
// concurrency holds across the cluster), and endpoints changed through
// another node are read every pushRefreshEvery.
func (s *Server) newPushPool(b broker.Broker, r scheduler.Retrier) *push.Pool {
	cfg := push.Config{Broker: b, Retrier: r, Metrics: pushMetrics{s.metrics}, Log: s.log, Now: s.now,
		AttemptID: s.hub.AttemptID, Keys: s.pushKeys, LimitGrace: s.cfg.LimitGrace, Version: s.cfg.Version}
	if c, ok := b.(broker.Clustered); ok {
		cfg.Leading, cfg.RefreshEvery = c.Leading, pushRefreshEvery
	}
	return push.NewPool(cfg)
}

// pushRegistryInfos are the push endpoints this node invokes, as the
// session registry lists them to the other nodes: none while it does not
// lead.
func (s *Server) pushRegistryInfos() []broker.SessionInfo {
	if !s.push.Pushing() {
		return nil
	}
	var out []broker.SessionInfo
	for _, e := range s.push.List() {
		w := pushWorker(e, "")
		out = append(out, broker.SessionInfo{ID: e.SessionID, Queues: w.GetQueues(), Concurrency: w.GetConcurrency(),
			InFlight: w.GetInFlight(), Labels: w.GetLabels(), ConnectedAt: e.Started})
	}
	return out
}

// pushMetrics is what the push endpoints record (push.Metrics), in the
// server's metrics.
type pushMetrics struct{ m *metrics }

func (p pushMetrics) TaskDispatched(t *broker.Task, now time.Time) { p.m.dispatchedTask(t, now) }

func (p pushMetrics) AttemptEnded(queue, typ string, kind broker.DecisionKind, to broker.State, ran time.Duration) {
	p.m.attemptEnded(queue, typ, kind, to, ran)
}

func (p pushMetrics) PushAnswered(queue, class string, took time.Duration) {
	p.m.pushAnswered(queue, class, took)
}
