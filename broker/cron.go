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
	// refused); LastTaskID the task it last enqueued.
	LastRun    time.Time
	LastFire   time.Time
	LastTaskID string
	// LastError says why the latest fire enqueued no task (its task was
	// refused: the queue full, the unique key held); empty when it
	// enqueued one.
	LastError string
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
	// Skip records a fire that was missed (the server was down at FireAt):
	// the entry moves on to Next and nothing is enqueued.
	Skip bool
	Now  time.Time
	// Entry, when set, is the entry as the caller read it to build the
	// fire: the fire is refused (ErrAlreadyFired) when the stored entry's
	// spec or task template is no longer Entry's, as one read before any
	// other change is. An update that keeps NextRun (it changes the task
	// template only) leaves FireAt as it was, so NextRun alone does not
	// tell a fire built from the old template.
	Entry *CronEntry
}
