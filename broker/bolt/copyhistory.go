package bolt

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	bbolt "go.etcd.io/bbolt"

	"github.com/conveyor-dev/conveyor/broker"
)

// CopyHistory reads the queues' history whole: every sample, in key order
// (by resolution, queue and bucket), and the latest round.
func (s *CopyStore) CopyHistory(context.Context) (broker.HistoryCopy, error) {
	var h broker.HistoryCopy
	err := s.view(func(tx *bbolt.Tx) error {
		hb := tx.Bucket(bucketHistory)
		if hb == nil {
			return nil
		}
		return hb.ForEach(func(k, v []byte) error {
			if bytes.Equal(k, keyHistoryRound) {
				h.Round = historyRoundOf(v)
				return nil
			}
			sample, err := historySampleOf(k, v)
			if err != nil {
				return err
			}
			h.Samples = append(h.Samples, broker.ResolutionSample{Resolution: broker.HistoryResolution(k[0]), HistorySample: sample})
			return nil
		})
	})
	return h, err
}

// LoadHistory writes the queues' history in one transaction.
func (s *CopyStore) LoadHistory(_ context.Context, h broker.HistoryCopy) error {
	if s.lock == nil {
		return errNotTarget
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		hb := tx.Bucket(bucketHistory)
		if !h.Round.IsZero() {
			if err := hb.Put(keyHistoryRound, historyRoundValue(h.Round)); err != nil {
				return fmt.Errorf("history round: %w", err)
			}
		}
		for _, r := range h.Samples {
			if r.Queue == "" || !slices.Contains(broker.HistoryResolutions, r.Resolution) {
				return fmt.Errorf("a history sample of queue %q at resolution %d", r.Queue, r.Resolution)
			}
			if err := hb.Put(historyKey(r.Resolution, r.Queue, r.Bucket), historyValue(r.HistoryCounters)); err != nil {
				return fmt.Errorf("history of %q: %w", r.Queue, err)
			}
		}
		return nil
	})
}
