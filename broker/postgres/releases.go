package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/conveyor-dev/conveyor/broker"
)

// Releases live in conveyor_releases, shared by every node: the first
// node to see a release records when, and every node ranks by that.

func scanRelease(row pgx.Row) (broker.Release, error) {
	var r broker.Release
	var first int64
	err := row.Scan(&r.ID, &first, &r.Draining)
	r.FirstSeen = time.Unix(0, first).UTC()
	return r, err
}

// SeeRelease records a release the first time any node sees it; see
// broker.ReleaseRegistry.
func (e *Engine) SeeRelease(ctx context.Context, id string, now time.Time) (broker.Release, error) {
	if err := e.checkOpen(); err != nil {
		return broker.Release{}, err
	}
	// The no-op update makes RETURNING give the stored row on a conflict.
	r, err := scanRelease(e.pool.QueryRow(ctx, `INSERT INTO conveyor_releases (id, first_seen) VALUES ($1, $2)
		ON CONFLICT (id) DO UPDATE SET id = conveyor_releases.id
		RETURNING id, first_seen, draining`, id, nanos(now)))
	return r, e.storageError(err)
}

// DrainRelease marks a release draining; see broker.ReleaseRegistry.
func (e *Engine) DrainRelease(ctx context.Context, id string) (broker.Release, error) {
	if err := e.checkOpen(); err != nil {
		return broker.Release{}, err
	}
	r, err := scanRelease(e.pool.QueryRow(ctx, `UPDATE conveyor_releases SET draining = true WHERE id = $1
		RETURNING id, first_seen, draining`, id))
	if isNoRows(err) {
		return r, fmt.Errorf("release %q was never seen: %w", id, broker.ErrNotFound)
	}
	return r, e.storageError(err)
}

// Releases lists the releases, the newest first; see
// broker.ReleaseRegistry.
func (e *Engine) Releases(ctx context.Context) ([]broker.Release, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := e.pool.Query(ctx, `SELECT id, first_seen, draining FROM conveyor_releases ORDER BY first_seen DESC, id COLLATE "C" DESC`)
	if err != nil {
		return nil, e.storageError(err)
	}
	defer rows.Close()
	var out []broker.Release
	for rows.Next() {
		r, err := scanRelease(rows)
		if err != nil {
			return nil, e.storageError(err)
		}
		out = append(out, r)
	}
	return out, e.storageError(rows.Err())
}
