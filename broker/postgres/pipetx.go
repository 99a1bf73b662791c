package postgres

import (
	"bytes"
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pipeTx is a transaction on one pooled connection that spends no round
// trip of its own on BEGIN or COMMIT: BEGIN goes out in one write with the
// transaction's first statement, and COMMIT with the statement the
// transaction left for last (atCommit). A lease or a batch of Results is
// a statement or two, so its BEGIN and COMMIT were most of its round trips
// (each a wake-up of the server process and of ours on a loaded machine).
//
// A statement sent with BEGIN runs in the transaction BEGIN opens (an
// explicit BEGIN in a pipeline makes its implicit transaction an ordinary
// one, which outlives the pipeline's Sync), so nothing changes for the
// statements but when BEGIN reaches the database: with the first
// statement rather than before it, which no statement can tell apart
// under READ COMMITTED (each reads its own snapshot).
type pipeTx struct {
	conn  pipeConn
	begun bool
	// ahead are statements whose results nothing reads, queued to go out
	// in one write with the next statement (sendAhead).
	ahead []*pgx.QueuedQuery
	// last is the statement queued to go out with COMMIT (atCommit).
	last *pgx.Batch
	done bool
}

// pipeConn is the connection a pipeTx runs on: one of the pool's, or
// one the pool is still making (warm.go), which release leaves alone.
type pipeConn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
	PgConn() *pgconn.PgConn
	Release()
}

// pooledConn is a connection of the pool, as a pipeConn.
type pooledConn struct{ *pgxpool.Conn }

func (c pooledConn) PgConn() *pgconn.PgConn { return c.Conn.Conn().PgConn() }

// beginPiped takes a connection of the pool for a pipeTx.
func beginPiped(ctx context.Context, pool *pgxpool.Pool) (*pipeTx, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	return &pipeTx{conn: pooledConn{conn}}, nil
}

// errTxDone is a statement after the transaction's end.
var errTxDone = errors.New("postgres: statement after the transaction ended")

// sendAhead queues a statement whose result nothing reads to go out in
// one write with the transaction's next statement, or with its COMMIT;
// its failure fails that statement.
func (p *pipeTx) sendAhead(sql string, args ...any) {
	p.ahead = append(p.ahead, &pgx.QueuedQuery{SQL: sql, Arguments: args})
}

// direct reports whether a statement may go out on its own: the
// transaction has begun and nothing waits to go out ahead of it.
func (p *pipeTx) direct() bool { return p.begun && len(p.ahead) == 0 }

// batch is b with what must go out ahead of it in front: BEGIN when the
// transaction has not begun, then the statements sendAhead queued. It
// reports how many it put in front.
func (p *pipeTx) batch(b *pgx.Batch) (*pgx.Batch, int) {
	var front []*pgx.QueuedQuery
	if !p.begun {
		front = append(front, &pgx.QueuedQuery{SQL: "BEGIN"})
		p.begun = true
	}
	front, p.ahead = append(front, p.ahead...), nil
	if len(front) == 0 {
		return b, 0
	}
	return &pgx.Batch{QueuedQueries: append(front, b.QueuedQueries...)}, len(front)
}

// send sends b (with what must go ahead of it in front) and passes the
// results of what went ahead.
func (p *pipeTx) send(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	b, front := p.batch(b)
	br := p.conn.SendBatch(ctx, b)
	for range front {
		if _, err := br.Exec(); err != nil {
			return failedBatch{br: br, err: err}
		}
	}
	return br
}

// one is a batch of one statement.
func one(sql string, args []any) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(sql, args...)
	return b
}

// Exec runs a statement.
func (p *pipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if p.done {
		return pgconn.CommandTag{}, errTxDone
	}
	if p.direct() {
		return p.conn.Exec(ctx, sql, args...)
	}
	br := p.send(ctx, one(sql, args))
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// Query runs a statement that returns rows.
func (p *pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if p.done {
		return nil, errTxDone
	}
	if p.direct() {
		return p.conn.Query(ctx, sql, args...)
	}
	br := p.send(ctx, one(sql, args))
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

// QueryRow runs a statement that returns one row.
func (p *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := p.Query(ctx, sql, args...)
	return &pipedRow{rows: rows, err: err}
}

// SendBatch sends b's statements in one write, BEGIN in front when due.
func (p *pipeTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if p.done {
		return failedBatch{err: errTxDone}
	}
	return p.send(ctx, b)
}

// copyBinary runs copySQL, a COPY ... FROM STDIN (FORMAT binary), with
// data as its stream. COPY cannot share a write with another statement:
// a transaction that begins with one sends BEGIN (and what else waits to
// go ahead) on its own first.
func (p *pipeTx) copyBinary(ctx context.Context, copySQL string, data []byte) error {
	if p.done {
		return errTxDone
	}
	if !p.direct() {
		b, _ := p.batch(&pgx.Batch{})
		if err := p.conn.SendBatch(ctx, b).Close(); err != nil {
			return err
		}
	}
	_, err := p.conn.PgConn().CopyFrom(ctx, bytes.NewReader(data), copySQL)
	return err
}

// atCommit queues a statement whose result nothing reads to go out with
// COMMIT; its failure fails the commit.
func (p *pipeTx) atCommit(sql string, args ...any) {
	if p.last == nil {
		p.last = &pgx.Batch{}
	}
	p.last.Queue(sql, args...)
}

// Commit commits the transaction, the statements left for last in the
// same write. A transaction that ran no statement has nothing to commit.
func (p *pipeTx) Commit(ctx context.Context) error {
	if p.done {
		return errTxDone
	}
	defer p.release()
	if !p.begun && p.last == nil && len(p.ahead) == 0 {
		return nil
	}
	b := p.last
	if b == nil {
		b = &pgx.Batch{}
	}
	b.Queue("COMMIT")
	br := p.send(ctx, b)
	var err error
	for i := range b.QueuedQueries {
		tag, xerr := br.Exec()
		if err = xerr; err != nil {
			break
		}
		if i == len(b.QueuedQueries)-1 && tag.String() == "ROLLBACK" {
			// The database ended an aborted transaction instead.
			err = pgx.ErrTxCommitRollback
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		// A statement before the COMMIT failed: the database skipped the
		// rest and holds the transaction aborted. End it, so that the
		// connection goes back to the pool clean.
		_, _ = p.conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
	return err
}

// Rollback ends the transaction without its changes.
func (p *pipeTx) Rollback(ctx context.Context) error {
	if p.done {
		return nil
	}
	defer p.release()
	if !p.begun {
		return nil
	}
	_, err := p.conn.Exec(ctx, "ROLLBACK")
	return err
}

// release gives the connection back to the pool; one whose transaction's
// end is unknown (the connection failed under it) is closed by the pool.
func (p *pipeTx) release() {
	p.done = true
	p.conn.Release()
}

// batchRows are the rows of a statement sent in a batch: closing them
// closes the batch, so that the connection is free for the next.
type batchRows struct {
	pgx.Rows
	br  pgx.BatchResults
	err error
}

func (r *batchRows) Close() {
	if r.br == nil {
		return
	}
	r.Rows.Close()
	r.err = r.br.Close()
	r.br = nil
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

// pipedRow is QueryRow's row: pgx.Row's rules on its rows.
type pipedRow struct {
	rows pgx.Rows
	err  error
}

func (r *pipedRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	defer r.rows.Close()
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := r.rows.Scan(dest...); err != nil {
		return err
	}
	r.rows.Close()
	return r.rows.Err()
}

// failedBatch is a batch whose BEGIN failed (or that was never sent):
// every result is its error.
type failedBatch struct {
	br  pgx.BatchResults
	err error
}

func (f failedBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, f.err }
func (f failedBatch) Query() (pgx.Rows, error)         { return nil, f.err }
func (f failedBatch) QueryRow() pgx.Row                { return &pipedRow{err: f.err} }
func (f failedBatch) Tx() pgx.Tx                       { return nil }
func (f failedBatch) Close() error {
	if f.br != nil {
		_ = f.br.Close()
	}
	return f.err
}
