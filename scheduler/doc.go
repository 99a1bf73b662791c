// Package scheduler holds Conveyor's time-based rules and the background
// roles that apply them, one file each:
//
//   - retry.go: what a worker's outcome or a lapsed lease leads to, and
//     the retry backoff (Retrier, Backoff);
//   - promoter.go: due SCHEDULED and RETRY tasks become pending, and
//     waiting tasks whose expiry passed are archived;
//   - purger.go: how long terminal tasks are kept (Retention), and the
//     loop that deletes them once it passed;
//   - aggregator.go: the default policy of aggregation groups (the engine
//     fires them on the promoter's rounds);
//   - cron.go: cron specs (ParseCronSpec) and the scheduler that applies
//     each entry's fires (Cron), woken by broker.Notifier.CronsChanged;
//   - loop.go: the timer loop every role runs on.
//
// Nothing here scans or polls. Each role is a Loop: it runs once at
// start, learns from the broker when it is next due, sleeps on a timer
// until then, and is woken early by Kick whenever the broker reports that
// something earlier was added (broker.Notifier.TimersChanged). The due
// times are wall-clock times and timers run on the monotonic clock, so the
// promoter, the purger and the cron loop also wake every DefaultMaxSleep
// while a due time is pending: a wall clock stepped forward (or a machine
// resumed from suspend) delays them by at most that. The lease reaper does
// not: a lease lapses after a TTL without heartbeats, which its monotonic
// timer measures better than a stepped wall clock does. A job that
// fails is retried after RetryDelay. Every Loop has the one lifecycle of
// the server's services: Start(ctx) returns once running, Stop(ctx) is
// idempotent.
package scheduler
