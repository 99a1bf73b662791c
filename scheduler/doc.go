// Package scheduler runs Conveyor's timed background work: promoting
// SCHEDULED and RETRY tasks when they come due (and archiving waiting tasks
// whose expiry passed), and purging terminal tasks whose retention passed.
//
// Nothing here scans or polls. Each job is a Loop: it runs once at start,
// learns from the broker when it is next due, sleeps on a timer until then,
// and is woken early by Kick whenever the broker reports that something
// earlier was added (broker.Notifier.TimersChanged). A job that fails is
// retried after RetryDelay.
package scheduler
