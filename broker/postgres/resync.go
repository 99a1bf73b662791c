package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The hints follow the transactions the engine saw commit. A COMMIT whose
// answer was lost (the database restarted or the connection was cut under
// it) may have been applied or not, and the engine cannot tell: what it
// did is missing from the hints, and a ready count one short leaves a
// PENDING task that no session is woken for. So such a commit marks the
// hints stale, and the next commit that succeeds starts a resync: the
// counts, totals, configuration and fired groups are read again from the
// database, with every other commit held back meanwhile (e.commits), so
// that the counts read and the transactions applied to the hints meet
// exactly. What lives only in memory (rate buckets and their timers, the
// reservations of calls in progress) is kept.

// resyncTimeout bounds one resync's reads.
const resyncTimeout = time.Minute

// commitOutcomeUnknown reports whether a failed COMMIT may have been
// applied: the connection failed under it, or the server ended the session
// (a FATAL or PANIC error, as in a shutdown) rather than refusing the
// transaction with an ERROR. A failure before anything was sent is known
// not to have committed.
func commitOutcomeUnknown(err error) bool {
	if errors.Is(err, pgx.ErrTxCommitRollback) || pgconn.SafeToRetry(err) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Severity == "FATAL" || pe.Severity == "PANIC"
	}
	return true
}

// startResync runs a resync in the background unless one is running, or
// the hints are no longer stale.
func (e *Engine) startResync() {
	if !e.hintsStale.CompareAndSwap(true, false) {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return
	}
	e.resyncs.Add(1)
	go func() {
		defer e.resyncs.Done()
		if err := e.resync(); err != nil {
			e.hintsStale.Store(true) // the next commit tries again
			e.log.Warn("could not read the queue counts again", "err", err)
		}
	}()
}

// resync reads the hints again, with every commit held back, and sends the
// signals a change they missed may owe: TasksReady for each queue with
// work, TimersChanged with the timer hints forgotten (so the timer loops
// ask the database), and room for the producers waiting on a bound.
func (e *Engine) resync() error {
	ctx, cancel := context.WithTimeout(context.Background(), resyncTimeout)
	defer cancel()
	// The connection comes first: the transactions held back at their
	// commit keep theirs, and could take the pool's last one.
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	e.remote.Lock()
	defer e.remote.Unlock()
	return e.resyncLocked(ctx, conn)
}

// resyncLocked is resync, with e.remote held.
func (e *Engine) resyncLocked(ctx context.Context, conn *pgxpool.Conn) error {
	// The other nodes' changes wait too (applyRemote): one committed
	// after the counts are read and applied before they replace the
	// hints would be lost, and a queue's count left short (its sessions
	// asleep with tasks ready). Held back, each is applied after, unless
	// the read saw its transactions (its notification names them): the
	// counts are read under one snapshot, kept to tell.
	e.commits.Lock()
	defer e.commits.Unlock()
	qs, snap, err := readHintsSnapshot(ctx, conn)
	if err != nil {
		return err
	}
	e.resynced = &snap
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	for name, q := range e.hints.queues {
		q.stored(qs[name]) // a queue the database no longer holds has nothing stored
	}
	for name, q := range qs {
		if _, ok := e.hints.queues[name]; !ok {
			e.hints.queues[name] = q
		}
	}
	e.hints.bounded = 0
	e.hints.nextPromote, e.hints.nextLease, e.hints.purgeOwn = 0, 0, 0
	e.hints.ended = [numClasses]int64{}
	e.promoteFloors.resetLocked()
	e.purgeFloors.resetLocked()
	now := e.cfg.Now()
	for name, q := range e.hints.queues {
		if q.cfg.MaxWaiting > 0 {
			e.hints.bounded++
			e.roomChangedLocked(q)
		}
		if e.dispatchableLocked(q, now) > 0 || e.groupsWaitingLocked(q) {
			e.note.TasksReady(name)
		}
	}
	e.note.TimersChanged()
	e.note.CronsChanged()
	return nil
}

// stored replaces what q holds of the database with what read found (nil:
// nothing), keeping what lives in memory only: the rate bucket, and the
// reservations of the calls in progress.
func (q *queueHint) stored(read *queueHint) {
	if read == nil {
		read = &queueHint{fired: map[int64]firedGroup{}}
	}
	q.paused, q.cfg, q.counts, q.ready, q.fired = read.paused, read.cfg, read.counts, read.ready, read.fired
	q.enqueued, q.processed, q.failed, q.expired = read.enqueued, read.processed, read.failed, read.expired
}

// readHintsSnapshot reads the hints under one snapshot, and returns it.
func readHintsSnapshot(ctx context.Context, conn *pgxpool.Conn) (map[string]*queueHint, snapshot, error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, snapshot{}, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var text string
	if err := tx.QueryRow(ctx, `SELECT pg_current_snapshot()::text`).Scan(&text); err != nil {
		return nil, snapshot{}, err
	}
	snap, err := parseSnapshot(text)
	if err != nil {
		return nil, snapshot{}, err
	}
	qs, err := readHints(ctx, tx)
	return qs, snap, err
}
