package server

import (
	"context"
	"slices"

	"github.com/conveyor-dev/conveyor/broker"
)

// Which types of a queue's waiting tasks no live worker can take
// (QueueInfo.unserved_types, conveyor_queue_unserved_types).

// unservedTypes lists the types of q's ready tasks that no live session
// of this node can take (broker.KindLister): they wait, PENDING. A failure
// to list them leaves the list empty: it is advice, not a count.
func (s *Server) unservedTypes(ctx context.Context, q broker.QueueInfo) []string {
	kl, ok := s.broker.(broker.KindLister)
	if !ok || q.Counts[broker.StatePending] == 0 {
		return nil
	}
	kinds, err := kl.WaitingKinds(ctx, q.Name)
	if err != nil {
		s.log.Warn("listing the kinds of waiting tasks failed", "queue", q.Name, "err", err)
		return nil
	}
	// A push endpoint takes every type, never at most once (the leading
	// node pushes: its settings are the queue's, on every node).
	pushed := q.Config.Push.URL != ""
	var out []string
	var others []broker.SessionInfo // the other nodes' sessions, read once if needed
	othersRead := false
	for _, k := range kinds {
		if pushed && !k.AtMostOnce || s.hub.Takes(q.Name, k) || slices.Contains(out, k.Type) {
			continue
		}
		if !othersRead {
			others, othersRead = s.otherSessions(ctx), true
		}
		if !slices.ContainsFunc(others, func(o broker.SessionInfo) bool {
			return sessionTakes(o, q.Name, k) && (o.ReleaseID == "" || !s.hub.Draining(o.ReleaseID))
		}) {
			out = append(out, k.Type)
		}
	}
	return out
}

// otherSessions lists the sessions the registry records (every node's;
// this node's too, which the hub answered for already). None when the
// engine keeps no registry, or it cannot be read.
func (s *Server) otherSessions(ctx context.Context) []broker.SessionInfo {
	reg, ok := s.broker.(broker.SessionRegistry)
	if !ok {
		return nil
	}
	ss, err := reg.Sessions(ctx)
	if err != nil {
		s.log.Warn("reading the session registry failed", "err", err)
	}
	return ss
}

// sessionTakes reports whether a recorded session serving queue can take
// tasks of kind k.
func sessionTakes(s broker.SessionInfo, queue string, k broker.Kind) bool {
	if _, ok := s.Queues[queue]; !ok {
		return false
	}
	return broker.WorkerRoute(s.Types, s.BatchTypes, s.StartAuthorization).Takes(k.Type, k.AtMostOnce)
}
