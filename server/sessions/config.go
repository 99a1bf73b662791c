package sessions

import "time"

// Config holds the session settings. The server fills every field (its
// own Config documents the flags, and gives a zero field the default
// below); NewHub takes each as given.
type Config struct {
	// LeaseTTL is how long a dispatched task's lease lives without a
	// heartbeat; the Welcome tells workers to heartbeat every LeaseTTL/3.
	LeaseTTL time.Duration
	// LimitGrace is how long past its deadline or timeout an attempt may
	// keep its lease.
	LimitGrace time.Duration
	// MaxSessionConcurrency bounds how many deliveries one session is sent
	// at once (its window); a session that declares more is admitted and
	// sent at most this many. The server's default is
	// DefaultMaxSessionConcurrency.
	MaxSessionConcurrency int
	// MaxSessionBytes bounds the task bytes one session may hold
	// unanswered; at least MaxEnvelopeBytes. The server's default is
	// DefaultMaxSessionBytes.
	MaxSessionBytes int64
	// ReclaimWindow is how long a lapsed delivery keeps its session's slot
	// while the worker still owes its Result. The server's default is
	// DefaultReclaimWindow.
	ReclaimWindow time.Duration
	// Version is the server's version, sent in the Welcome and checked
	// against a Hello's min_server_version.
	Version string
	// MinSDKVersion is the oldest worker SDK version admitted (semver),
	// sent in the Welcome. It must parse.
	MinSDKVersion string
}

// Defaults of the session limits.
const (
	DefaultMaxSessionConcurrency = 4096
	DefaultMaxSessionBytes       = 64 << 20
	DefaultReclaimWindow         = 5 * time.Second
)
