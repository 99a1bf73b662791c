package postgres

import (
	"context"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// The queues' history lives in conveyor_history, one row per resolution,
// bucket and queue (migrations/0008_history.sql).

// RecordHistory stores a sample per queue and resolution where its bucket
// has none, and drops what fell out of retention, in one transaction; see
// broker.HistoryKeeper.
func (e *Engine) RecordHistory(ctx context.Context, now time.Time, samples []broker.HistorySample) error {
	names := make([]string, len(samples))
	enq := make([]int64, len(samples))
	proc := make([]int64, len(samples))
	failed := make([]int64, len(samples))
	for i, s := range samples {
		names[i], enq[i], proc[i], failed[i] = s.Queue, s.Enqueued, s.Processed, s.Failed
	}
	return e.inTx(ctx, func(t *txn) error {
		if _, err := t.exec(ctx, `INSERT INTO conveyor_history_round (at) VALUES ($1)
			ON CONFLICT (one) DO UPDATE SET at = excluded.at`, nanos(now)); err != nil {
			return err
		}
		for _, res := range broker.HistoryResolutions {
			buckets := make([]int64, len(samples))
			for i, s := range samples {
				buckets[i] = nanos(res.Bucket(s.Bucket))
			}
			if _, err := t.exec(ctx, `INSERT INTO conveyor_history (resolution, bucket, queue, enqueued, processed, failed)
				SELECT $1, b, q, e, p, f FROM unnest($2::bigint[], $3::text[], $4::bigint[], $5::bigint[], $6::bigint[]) AS u(b, q, e, p, f)
				ON CONFLICT DO NOTHING`, int16(res), buckets, names, enq, proc, failed); err != nil {
				return err
			}
			if _, err := t.exec(ctx, `DELETE FROM conveyor_history WHERE resolution = $1 AND bucket < $2`,
				int16(res), nanos(res.KeepFrom(now))); err != nil {
				return err
			}
		}
		return nil
	})
}

// HistoryRound returns the latest round's time; see broker.HistoryKeeper.
func (e *Engine) HistoryRound(ctx context.Context) (time.Time, error) {
	if err := e.checkOpen(); err != nil {
		return time.Time{}, err
	}
	var at int64
	err := e.pool.QueryRow(ctx, `SELECT at FROM conveyor_history_round`).Scan(&at)
	if isNoRows(err) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, e.storageError(err)
	}
	return time.Unix(0, at).UTC(), nil
}

// History returns stored samples; see broker.HistoryKeeper.
func (e *Engine) History(ctx context.Context, res broker.HistoryResolution, queue string, since time.Time) ([]broker.HistorySample, error) {
	if err := e.checkOpen(); err != nil {
		return nil, err
	}
	rows, err := e.pool.Query(ctx, `SELECT queue, bucket, enqueued, processed, failed FROM conveyor_history
		WHERE resolution = $1 AND bucket >= $2 AND ($3 = '' OR queue = $3)
		ORDER BY queue COLLATE "C", bucket`, int16(res), nanos(since), queue)
	if err != nil {
		return nil, e.storageError(err)
	}
	defer rows.Close()
	var out []broker.HistorySample
	for rows.Next() {
		var s broker.HistorySample
		var bucket int64
		if err := rows.Scan(&s.Queue, &bucket, &s.Enqueued, &s.Processed, &s.Failed); err != nil {
			return nil, e.storageError(err)
		}
		s.Bucket = time.Unix(0, bucket).UTC()
		out = append(out, s)
	}
	return out, e.storageError(rows.Err())
}

var _ broker.HistoryKeeper = (*Engine)(nil)
