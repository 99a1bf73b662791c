package conveyor

import (
	"fmt"
	"maps"
	"math"
	"os"
	"strconv"
	"time"
	"unicode/utf8"
)

// WorkerOption configures a Worker. Every connection Option (WithToken,
// WithProtocol, WithHTTPClient, WithTLSConfig, WithLogger) is a
// WorkerOption too.
type WorkerOption interface {
	applyToWorker(*workerConfig)
}

type workerOptionFunc func(*workerConfig)

func (f workerOptionFunc) applyToWorker(c *workerConfig) { f(c) }

type workerConfig struct {
	connOpts         []Option
	queues           map[string]int32
	concurrency      int
	labels           map[string]string
	drainGrace       time.Duration
	progressInterval time.Duration
	minServerVersion string
	backoff          backoff
	sessionHook      func(sessionID string)
	// releaseID is Hello.release_id; releaseSet says WithReleaseID gave
	// it (else CONVEYOR_RELEASE_ID does).
	releaseID  string
	releaseSet bool
	errs       []error
}

func (c *workerConfig) errorf(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("conveyor: "+format, args...))
}

// WithQueue adds a queue for the Worker to serve, with its weight: under
// backlog the server dispatches from each queue in proportion to its weight
// (3 and 1 give a 3:1 mix). A name must match ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$
// and be at most 1,024 bytes; weights must be > 0 (NewWorker checks both,
// by the server's rules). A Worker serves the queue "default" with weight
// 1 unless WithQueue or WithQueues names others.
func WithQueue(name string, weight int32) WorkerOption {
	return workerOptionFunc(func(c *workerConfig) {
		if c.queues == nil {
			c.queues = map[string]int32{}
		}
		c.queues[name] = weight
	})
}

// WithQueues replaces the served queues with queues (name → weight); see
// WithQueue.
func WithQueues(queues map[string]int32) WorkerOption {
	return workerOptionFunc(func(c *workerConfig) { c.queues = maps.Clone(queues) })
}

// WithConcurrency sets how many tasks the Worker runs at once, across all
// its queues; it is also the dispatch window it asks of the server. It must
// be > 0. Defaults to DefaultWorkerConcurrency (10).
func WithConcurrency(n int) WorkerOption {
	return workerOptionFunc(func(c *workerConfig) {
		if n <= 0 || n > math.MaxInt32 {
			c.errorf("concurrency must be 1..%d, got %d", math.MaxInt32, n)
			return
		}
		c.concurrency = n
	})
}

// WithLabels adds informational labels (such as a region or a version)
// that operators see in the server's worker list. The Worker adds
// LabelHost (the host name) and LabelPID (its process id) unless these
// set them; set one to "" to send none.
func WithLabels(labels map[string]string) WorkerOption {
	return workerOptionFunc(func(c *workerConfig) {
		for k, v := range labels {
			// A Hello that is not valid UTF-8 cannot be encoded, and the
			// Worker would retry the session forever.
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				c.errorf("label %q=%q is not valid UTF-8", k, v)
				return
			}
		}
		if c.labels == nil {
			c.labels = map[string]string{}
		}
		maps.Copy(c.labels, labels)
	})
}

// WithDrainGrace sets how long a stopping Worker lets its running handlers
// finish and report their real outcome. Handlers still running then have
// their context canceled with cause ErrWorkerShutdown and are reported
// RELEASED (back to PENDING, no retry counted) if they return within 5 more
// seconds; the stream then closes, and the server releases whatever is
// left the same way. 0 cancels running handlers at once. Defaults to
// DefaultDrainGrace (30s).
func WithDrainGrace(d time.Duration) WorkerOption {
	return workerOptionFunc(func(c *workerConfig) {
		if d < 0 {
			c.errorf("drain grace must not be negative, got %s", d)
			return
		}
		c.drainGrace = d
	})
}

// WithProgressInterval sets the shortest gap between two progress updates
// the Worker sends for one task; updates in between are coalesced, the
// latest winning. It must be > 0. Defaults to DefaultProgressInterval (1s).
func WithProgressInterval(d time.Duration) WorkerOption {
	return workerOptionFunc(func(c *workerConfig) {
		if d <= 0 {
			c.errorf("progress interval must be > 0, got %s", d)
			return
		}
		c.progressInterval = d
	})
}

// WithMinServerVersion makes the Worker require a server of at least
// version v (semver, such as "v1.2.0"). An older server refuses the session
// with invalid_argument, which ends Run with that error. Defaults to no
// requirement.
func WithMinServerVersion(v string) WorkerOption {
	return workerOptionFunc(func(c *workerConfig) {
		if !utf8.ValidString(v) {
			c.errorf("minimum server version %q is not valid UTF-8", v)
			return
		}
		c.minServerVersion = v
	})
}

// WithReconnectBackoff sets the reconnect backoff: the delay before attempt
// n (0-based, reset once a session is established) is uniformly random in
// [0, min(max, base*2^n)). Both must be > 0. Defaults to
// DefaultReconnectBase (500ms) and DefaultReconnectMax (30s), the
// protocol's reference values.
func WithReconnectBackoff(base, max time.Duration) WorkerOption {
	return workerOptionFunc(func(c *workerConfig) {
		if base <= 0 || max <= 0 {
			c.errorf("reconnect backoff base and max must be > 0, got %s and %s", base, max)
			return
		}
		c.backoff = backoff{base: base, max: max}
	})
}

// WithSessionHook makes the Worker call hook with the session id each time
// a session is established (on each Welcome, so again after every
// reconnect), before the session serves any dispatch. It runs on the
// session's goroutine: it must return quickly. Programs use it to tell a
// supervisor the worker is ready; the conformance worker prints
// "ready <session_id>" with it. A nil hook does nothing. Defaults to none.
func WithSessionHook(hook func(sessionID string)) WorkerOption {
	return workerOptionFunc(func(c *workerConfig) { c.sessionHook = hook })
}

// EnvReleaseID is the environment variable a Worker takes its release id
// from when WithReleaseID is not given.
const EnvReleaseID = "CONVEYOR_RELEASE_ID"

// WithReleaseID names the release (the deployed version of the code) the
// Worker belongs to, sent in every Hello. It is opaque to the server, which
// ranks releases by when it first saw each: new work goes to the newest
// release that can take it, older ones get work only when no newer one
// can, and an operator can drain a release (AdminService.DrainRelease) so
// that its workers take no new work. A build id or an image digest fits. An
// empty id means unversioned: such a Worker ranks below every release.
// Defaults to the environment variable CONVEYOR_RELEASE_ID (EnvReleaseID),
// read by NewWorker, or else unversioned; WithReleaseID, even with "",
// overrides it.
//
// An id must be valid UTF-8 and at most 1,024 bytes (NewWorker checks it,
// by the server's rule).
func WithReleaseID(id string) WorkerOption {
	return workerOptionFunc(func(c *workerConfig) {
		c.releaseID, c.releaseSet = id, true
	})
}

// checkReleaseID reports a release id the server would refuse; from
// names where it came from.
func (c *workerConfig) checkReleaseID(from string) {
	switch id := c.releaseID; {
	case !utf8.ValidString(id):
		c.errorf("%s %q is not valid UTF-8", from, id)
	case len(id) > maxLabelBytes:
		c.errorf("%s is %d bytes; the limit is %d", from, len(id), maxLabelBytes)
	}
}

// The labels a Worker sends unless WithLabels sets them: where it runs.
const (
	LabelHost = "host"
	LabelPID  = "pid"
)

// withProcessLabels is labels with the host name and process id added
// where labels does not name them, and the empty ones dropped.
func withProcessLabels(labels map[string]string) map[string]string {
	out := maps.Clone(labels)
	if out == nil {
		out = map[string]string{}
	}
	if _, ok := out[LabelHost]; !ok {
		if h, err := os.Hostname(); err == nil && utf8.ValidString(h) {
			out[LabelHost] = h
		}
	}
	if _, ok := out[LabelPID]; !ok {
		out[LabelPID] = strconv.Itoa(os.Getpid())
	}
	maps.DeleteFunc(out, func(_, v string) bool { return v == "" })
	return out
}
