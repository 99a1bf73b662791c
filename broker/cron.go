package broker

import "time"

// CronEntry is a periodic task template, as stored. The schedule (Spec)
// is the caller's to parse; the engine keeps the entry and applies fires.
type CronEntry struct {
	ID          string
	Spec        string
	Queue       string
	Type        string
	Payload     []byte
	ContentType string
	Metadata    map[string]string
	// Options are the fired tasks' options, encoded, opaque (as
	// Task.Options).
	Options []byte
	Paused  bool
	// NextRun is when the entry fires next, as the scheduler last said.
	NextRun time.Time
	// LastRun is when the latest fire was applied; LastFire the scheduled
	// time it was for (the dedupe key: a fire for a time not after it is
	// refused); LastTaskID the task it enqueued.
	LastRun    time.Time
	LastFire   time.Time
	LastTaskID string
}

// CronFire applies one scheduled fire of an entry: the task it enqueues
// and the entry's new NextRun, in one commit.
type CronFire struct {
	ID string
	// FireAt is the scheduled time of the fire.
	FireAt time.Time
	// Next is the entry's next scheduled time after this fire.
	Next time.Time
	// Task is the task the fire enqueues.
	Task NewTask
	Now  time.Time
}

// ErrAlreadyFired is what FireCron answers for a fire whose time is not
// after the entry's last one: it was applied before (a restart, a retry).
var ErrAlreadyFired = errorString("this fire was already applied")

type errorString string

func (e errorString) Error() string { return string(e) }
