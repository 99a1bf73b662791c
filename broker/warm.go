package broker

import "context"

// LeaseWarmer is an engine whose first lease by a route costs more than
// the ones after it: PostgreSQL's engine plans each shape of its lease
// statement once on each of its connections, a few milliseconds each. A
// worker's session tells it its route when it opens, before the session
// is listed or sent anything, and a push endpoint's consumer before its
// first lease, so that the first tasks they are sent do not wait for
// that work; a session of a newer release names the narrower routes the
// older sessions of its queues lease by once it takes types from them.
// WarmLeases is a hint: it returns once the engine is ready for the
// route's leases (or ctx ends), and nothing the leases decide depends on
// it.
type LeaseWarmer interface {
	WarmLeases(ctx context.Context, r Route)
}
