package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/conveyor-dev/conveyor/broker"
)

// bucketHistory holds the queues' history samples (broker.HistoryKeeper),
// keyed resolution (1 byte), queue name, 0, bucket start (8 bytes, Unix
// ns, big-endian), so that one queue's samples of one resolution are one
// range in time order. A value is the counters enqueued, processed,
// failed: 8 bytes each, big-endian.
var bucketHistory = []byte("history")

const historyValueLen = 24

// keyHistoryRound holds the latest round's time (Unix ns, 8 bytes,
// big-endian): no sample key is a lone byte.
var keyHistoryRound = []byte{0}

func historyPrefix(res broker.HistoryResolution, queue string) []byte {
	k := make([]byte, 0, 2+len(queue)+8)
	k = append(k, byte(res))
	if queue != "" {
		k = append(append(k, queue...), 0)
	}
	return k
}

// historyKey is a sample's key; a bucket before 1970 (the zero time of a
// read from the start) sorts first.
func historyKey(res broker.HistoryResolution, queue string, bucket time.Time) []byte {
	var ns int64
	if bucket.After(time.Unix(0, 0)) {
		ns = bucket.UnixNano()
	}
	return binary.BigEndian.AppendUint64(historyPrefix(res, queue), uint64(ns))
}

// RecordHistory stores a sample per queue and resolution where its bucket
// has none, and drops what fell out of retention; see
// broker.HistoryKeeper.
func (e *Engine) RecordHistory(ctx context.Context, now time.Time, samples []broker.HistorySample) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return errClosed
	}
	b := e.commit.appendSyncLocked(recordHistoryOp(now, samples), nil)
	e.mu.Unlock()
	return e.commit.wait(ctx, b)
}

func recordHistoryOp(now time.Time, samples []broker.HistorySample) op {
	samples = append([]broker.HistorySample(nil), samples...) // not retained from the caller
	return func(w *txw) error {
		hb := w.tx.Bucket(bucketHistory)
		if err := hb.Put(keyHistoryRound, historyRoundValue(now)); err != nil {
			return fmt.Errorf("history round: %w", err)
		}
		for _, res := range broker.HistoryResolutions {
			for _, q := range samples {
				k := historyKey(res, q.Queue, res.Bucket(q.Bucket))
				if hb.Get(k) == nil {
					if err := hb.Put(k, historyValue(q.HistoryCounters)); err != nil {
						return fmt.Errorf("history of %q: %w", q.Queue, err)
					}
				}
				if err := dropHistory(hb, historyPrefix(res, q.Queue), historyKey(res, q.Queue, res.KeepFrom(now))); err != nil {
					return err
				}
			}
		}
		return nil
	}
}

// historyValue is a sample's value: its counters.
func historyValue(c broker.HistoryCounters) []byte {
	v := make([]byte, 0, historyValueLen)
	v = binary.BigEndian.AppendUint64(v, uint64(c.Enqueued))
	v = binary.BigEndian.AppendUint64(v, uint64(c.Processed))
	return binary.BigEndian.AppendUint64(v, uint64(c.Failed))
}

// dropHistory deletes the keys with prefix that sort before end: one
// queue's samples older than its retention, or all of them when end is
// the prefix's limit.
func dropHistory(hb *bbolt.Bucket, prefix, end []byte) error {
	var old [][]byte
	c := hb.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix) && (end == nil || bytes.Compare(k, end) < 0); k, _ = c.Next() {
		old = append(old, append([]byte(nil), k...))
	}
	for _, k := range old {
		if err := hb.Delete(k); err != nil {
			return fmt.Errorf("drop history: %w", err)
		}
	}
	return nil
}

// dropQueueHistory forgets a deleted queue's history.
func dropQueueHistory(w *txw, queue string) error {
	hb := w.tx.Bucket(bucketHistory)
	for _, res := range broker.HistoryResolutions {
		if err := dropHistory(hb, historyPrefix(res, queue), nil); err != nil {
			return err
		}
	}
	return nil
}

// HistoryRound returns the latest round's time; see broker.HistoryKeeper.
func (e *Engine) HistoryRound(context.Context) (time.Time, error) {
	var at time.Time
	err := e.view(func(tx *bbolt.Tx) error {
		at = historyRoundOf(tx.Bucket(bucketHistory).Get(keyHistoryRound))
		return nil
	})
	return at, err
}

// historyRoundValue is keyHistoryRound's value for a round at now.
func historyRoundValue(now time.Time) []byte {
	return binary.BigEndian.AppendUint64(nil, uint64(now.UnixNano()))
}

// historyRoundOf is the round's time a keyHistoryRound value holds (zero:
// none).
func historyRoundOf(v []byte) time.Time {
	if len(v) != 8 {
		return time.Time{}
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(v))).UTC()
}

// History returns stored samples; see broker.HistoryKeeper.
func (e *Engine) History(_ context.Context, res broker.HistoryResolution, queue string, since time.Time) ([]broker.HistorySample, error) {
	var out []broker.HistorySample
	prefix := historyPrefix(res, queue)
	err := e.view(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketHistory).Cursor()
		start := prefix
		if queue != "" {
			start = historyKey(res, queue, since)
		}
		for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			s, err := historySampleOf(k, v)
			if err != nil {
				return err
			}
			if !s.Bucket.Before(since) {
				out = append(out, s)
			}
		}
		return nil
	})
	return out, err
}

func historySampleOf(k, v []byte) (broker.HistorySample, error) {
	if len(k) < 10 || k[len(k)-9] != 0 || len(v) != historyValueLen {
		return broker.HistorySample{}, fmt.Errorf("history record %q is damaged", k)
	}
	return broker.HistorySample{
		Bucket: time.Unix(0, int64(binary.BigEndian.Uint64(k[len(k)-8:]))).UTC(),
		HistoryCounters: broker.HistoryCounters{
			Queue:     string(k[1 : len(k)-9]),
			Enqueued:  int64(binary.BigEndian.Uint64(v)),
			Processed: int64(binary.BigEndian.Uint64(v[8:])),
			Failed:    int64(binary.BigEndian.Uint64(v[16:])),
		},
	}, nil
}

var _ broker.HistoryKeeper = (*Engine)(nil)
