package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// CopyHistory reads the queues' history whole: every sample, by
// resolution, queue (in byte order, as the embedded engine keeps them)
// and bucket, and the latest round.
func (s *CopyStore) CopyHistory(ctx context.Context) (broker.HistoryCopy, error) {
	var h broker.HistoryCopy
	var at int64
	switch err := s.tx.QueryRow(ctx, `SELECT at FROM conveyor_history_round`).Scan(&at); {
	case isNoRows(err):
	case err != nil:
		return h, fmt.Errorf("read the history round: %w", err)
	default:
		h.Round = time.Unix(0, at).UTC()
	}
	rows, err := s.tx.Query(ctx, `SELECT resolution, queue, bucket, enqueued, processed, failed FROM conveyor_history
		ORDER BY resolution, queue COLLATE "C", bucket`)
	if err != nil {
		return h, fmt.Errorf("read the history: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r broker.ResolutionSample
		var res int16
		var bucket int64
		if err := rows.Scan(&res, &r.Queue, &bucket, &r.Enqueued, &r.Processed, &r.Failed); err != nil {
			return h, fmt.Errorf("read the history: %w", err)
		}
		r.Resolution, r.Bucket = broker.HistoryResolution(res), time.Unix(0, bucket).UTC()
		h.Samples = append(h.Samples, r)
	}
	return h, rows.Err()
}

// LoadHistory stores the queues' history.
func (s *CopyStore) LoadHistory(ctx context.Context, h broker.HistoryCopy) error {
	if !s.target {
		return errNotTarget
	}
	if !h.Round.IsZero() {
		// A server that started on the empty destination may have left a
		// round of its own.
		if _, err := s.tx.Exec(ctx, `INSERT INTO conveyor_history_round (at) VALUES ($1)
			ON CONFLICT (one) DO UPDATE SET at = excluded.at`, nanos(h.Round)); err != nil {
			return fmt.Errorf("load the history round: %w", err)
		}
	}
	n := len(h.Samples)
	res, buckets := make([]int16, n), make([]int64, n)
	queues := make([]string, n)
	enq, proc, failed := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, r := range h.Samples {
		if r.Queue == "" || !slices.Contains(broker.HistoryResolutions, r.Resolution) {
			return fmt.Errorf("a history sample of queue %q at resolution %d", r.Queue, r.Resolution)
		}
		res[i], buckets[i], queues[i] = int16(r.Resolution), nanos(r.Bucket), r.Queue
		enq[i], proc[i], failed[i] = r.Enqueued, r.Processed, r.Failed
	}
	if _, err := s.tx.Exec(ctx, `INSERT INTO conveyor_history (resolution, bucket, queue, enqueued, processed, failed)
		SELECT * FROM unnest($1::int2[], $2::int8[], $3::text[], $4::int8[], $5::int8[], $6::int8[])`,
		res, buckets, queues, enq, proc, failed); err != nil {
		return fmt.Errorf("load the history: %w", err)
	}
	return nil
}
