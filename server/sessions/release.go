package sessions

import (
	"context"
	"errors"
	"slices"

	"connectrpc.com/connect"

	"github.com/conveyor-dev/conveyor/broker"
)

// Releases (Hello.release_id). The engine records when each release was
// first seen (broker.ReleaseRegistry); the hub keeps them in memory. New
// work goes to the newest release that can take it and has room: before a
// session leases from a queue, it passes over what a live session of a
// newer release serving the queue, with a free slot, can take (the whole
// queue when that session takes every type, else those types). Such a
// session is woken by the same signal and takes the work; when it fills
// up or ends, the older sessions of its queues are woken to look again.
// Sessions of a drained release lease nothing. With no versioned session
// live, none of this runs.

// seeRelease records the session's release and returns it (zero for an
// unversioned session).
func (h *Hub) seeRelease(ctx context.Context, id string) (broker.Release, error) {
	if id == "" {
		return broker.Release{}, nil
	}
	rr, ok := h.broker.(broker.ReleaseRegistry)
	if !ok {
		return broker.Release{}, connect.NewError(connect.CodeUnimplemented, errors.New("this server's storage engine does not record releases: hello.release_id must be empty"))
	}
	r, err := rr.SeeRelease(ctx, id, h.now())
	if err != nil {
		return broker.Release{}, err
	}
	h.mu.Lock()
	h.releases[id] = r
	h.mu.Unlock()
	return r, nil
}

// Drain marks release id drained (broker.ReleaseRegistry.DrainRelease):
// once it returns, this node's sessions of it lease nothing new, and the
// sessions they kept work from are woken.
func (h *Hub) Drain(ctx context.Context, id string) error {
	rr, ok := h.broker.(broker.ReleaseRegistry)
	if !ok {
		return connect.NewError(connect.CodeUnimplemented, errors.New("this server's storage engine does not record releases"))
	}
	r, err := rr.DrainRelease(ctx, id)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.releases[id] = r
	var queues []string
	for _, s := range h.sessions {
		if s.rel.ID == id {
			queues = append(queues, s.queues...)
		}
	}
	h.mu.Unlock()
	h.wakeQueues(queues)
	return nil
}

// Releases lists the releases recorded, the newest first, with how many
// sessions of each are live on this node.
func (h *Hub) Releases(ctx context.Context) ([]ReleaseInfo, error) {
	rr, ok := h.broker.(broker.ReleaseRegistry)
	if !ok {
		return nil, nil
	}
	rs, err := rr.Releases(ctx)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	live := map[string]int{}
	drained := map[string]bool{}
	for _, r := range rs {
		if r.Draining && !h.releases[r.ID].Draining {
			drained[r.ID] = true // another node drained it
		}
	}
	var queues []string
	for _, s := range h.sessions {
		live[s.rel.ID]++
		if drained[s.rel.ID] {
			queues = append(queues, s.queues...)
		}
	}
	out := make([]ReleaseInfo, len(rs))
	for i, r := range rs {
		h.releases[r.ID] = r
		out[i] = ReleaseInfo{Release: r, Sessions: live[r.ID]}
	}
	h.mu.Unlock()
	// Its sessions here take back the slots they offered, and the older
	// ones look again, as after a drain made here.
	h.wakeQueues(queues)
	return out, nil
}

// ReleaseInfo is a release and its live sessions on this node.
type ReleaseInfo struct {
	broker.Release
	Sessions int
}

// refreshReleases reads the releases again when this node has sessions
// of one, so that a drain another node made holds here too within one
// registry tick (nodes sharing a database).
func (h *Hub) refreshReleases() {
	if h.versioned.Load() == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), registrySyncEvery)
	defer cancel()
	if _, err := h.Releases(ctx); err != nil {
		h.log.Warn("reading the releases failed: a drain made on another node may not hold here yet", "err", err)
	}
}

// Draining reports whether release id is drained, as this node knows.
func (h *Hub) Draining(id string) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.releases[id].Draining
}

// draining reports whether s's release is drained.
func (h *Hub) draining(s *session) bool {
	if s.rel.ID == "" {
		return false
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.releases[s.rel.ID].Draining
}

// newer reports whether o's release ranks above s's: unversioned sessions
// rank below every release.
func newer(o, s *session) bool {
	switch {
	case o.rel.ID == "":
		return false
	case s.rel.ID == "":
		return true
	}
	return o.rel.Newer(s.rel)
}

// outranked reports whether s's release is drained, or a live session of
// a newer release, not drained, serves one of s's queues: then s leases
// only what routeFor leaves it, and offers no slot (parking).
func (h *Hub) outranked(s *session) bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if s.rel.ID != "" && h.releases[s.rel.ID].Draining {
		return true
	}
	for _, q := range s.queues {
		for _, o := range h.byQueue[q] {
			if o != s && newer(o, s) && !h.releases[o.rel.ID].Draining {
				return true
			}
		}
	}
	return false
}

// leaseCall is one Lease of a session: picks under one route.
type leaseCall struct {
	route broker.Route
	picks []broker.QueuePick
}

// leaseCalls splits s's picks by the route each may lease with, once the
// newer releases have had their share: one call in the common case, none
// for a queue left entirely to newer sessions.
func (h *Hub) leaseCalls(s *session, picks []broker.QueuePick) []leaseCall {
	if h.versioned.Load() == 0 {
		return []leaseCall{{route: s.route, picks: picks}}
	}
	var calls []leaseCall
	for _, p := range picks {
		r, ok := h.routeFor(s, p.Queue)
		if !ok {
			continue
		}
		i := slices.IndexFunc(calls, func(c leaseCall) bool { return sameRoute(c.route, r) })
		if i < 0 {
			calls = append(calls, leaseCall{route: r})
			i = len(calls) - 1
		}
		calls[i].picks = append(calls[i].picks, p)
	}
	return calls
}

// routeFor is s's route for queue, less what newer sessions with room
// take; false when they take everything s could.
func (h *Hub) routeFor(s *session, queue string) (broker.Route, bool) {
	h.mu.RLock()
	var covered []string
	all := false
	for _, o := range h.byQueue[queue] {
		if o == s || !newer(o, s) || h.releases[o.rel.ID].Draining || !o.hasRoom() {
			continue
		}
		if s.route.StartAuthorization && !o.route.StartAuthorization {
			continue // it cannot take the at-most-once tasks s can
		}
		if o.route.Types == nil {
			all = true
			break
		}
		covered = append(covered, o.route.Types...)
	}
	h.mu.RUnlock()
	r := s.route
	switch {
	case all:
		return r, false
	case len(covered) == 0:
		return r, true
	case r.Types == nil:
		r.Except = covered
		return r, true
	}
	r.Types = slices.DeleteFunc(slices.Clone(r.Types), func(t string) bool { return slices.Contains(covered, t) })
	return r, len(r.Types) > 0
}

// warmNarrowed tells an engine that readies itself for a route's leases
// (broker.LeaseWarmer) the routes the older sessions of s's queues lease
// by now that s, of a newer release, takes types from them (routeFor):
// fewer types, or exceptions, make a lease statement of another shape.
// s is listed: the warm-up runs beside it, and ends with it.
func (h *Hub) warmNarrowed(s *session) {
	w, ok := h.broker.(broker.LeaseWarmer)
	if !ok || s.rel.ID == "" {
		return
	}
	var routes []broker.Route
	for _, q := range s.queues {
		h.mu.RLock()
		older := slices.DeleteFunc(slices.Clone(h.byQueue[q]), func(o *session) bool { return !newer(s, o) })
		h.mu.RUnlock()
		for _, o := range older {
			r, ok := h.routeFor(o, q)
			if ok && !slices.ContainsFunc(routes, func(x broker.Route) bool { return sameRoute(x, r) }) {
				routes = append(routes, r)
			}
		}
	}
	if len(routes) == 0 {
		return
	}
	h.wg.Add(1) // s holds the hub open until it is unregistered, after this
	go func() {
		defer h.wg.Done()
		for _, r := range routes {
			w.WarmLeases(s.ctx, r)
		}
	}()
}

func sameRoute(a, b broker.Route) bool {
	return a.StartAuthorization == b.StartAuthorization && (a.Types == nil) == (b.Types == nil) &&
		slices.Equal(a.Types, b.Types) && slices.Equal(a.Except, b.Except)
}

// filledUp is told that s, of a release, has no free slot left: the older
// sessions of its queues may have left it work, and must look again.
func (h *Hub) filledUp(s *session) {
	if s.rel.ID != "" && h.versioned.Load() > 0 && !s.hasRoom() {
		h.wakeQueues(s.queues)
	}
}

// wakeQueues wakes every session of queues that has a free slot.
func (h *Hub) wakeQueues(queues []string) {
	slices.Sort(queues)
	for _, q := range slices.Compact(queues) {
		h.TasksReady(q)
	}
}

// ReleaseLoads counts this node's live sessions per release (ID "":
// unversioned), for the metrics.
func (h *Hub) ReleaseLoads() []ReleaseInfo {
	h.mu.RLock()
	defer h.mu.RUnlock()
	byID := map[string]*ReleaseInfo{}
	var out []ReleaseInfo
	for _, s := range h.sessions {
		r := byID[s.rel.ID]
		if r == nil {
			r = &ReleaseInfo{Release: broker.Release{ID: s.rel.ID, Draining: h.releases[s.rel.ID].Draining}}
			byID[s.rel.ID] = r
		}
		r.Sessions++
	}
	for _, r := range byID {
		out = append(out, *r)
	}
	return out
}
