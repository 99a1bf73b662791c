package broker_test

import (
	"math"
	"testing"

	"github.com/conveyor-dev/conveyor/broker"
)

// TestKeyLimit states the concurrency-key rules: a key admits and starts
// tasks while its count is below the queue's limit, 1 when unset.
func TestKeyLimit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		limit int32
		count int
		want  bool
	}{
		{0, 0, true}, {0, 1, false}, // unset: one at a time
		{3, 2, true}, {3, 3, false}, {3, 5, false}, // past a lowered limit
	} {
		c := broker.QueueConfig{ConcurrencyLimit: tc.limit}
		if got := c.KeyAdmits(tc.count); got != tc.want {
			t.Errorf("limit %d: KeyAdmits(%d) = %v, want %v", tc.limit, tc.count, got, tc.want)
		}
		if got := c.KeyStarts(tc.count); got != tc.want {
			t.Errorf("limit %d: KeyStarts(%d) = %v, want %v", tc.limit, tc.count, got, tc.want)
		}
	}
}

// TestActiveRoom states the cap on ACTIVE tasks: the room left under it,
// none past it, unbounded without it; a fired group goes whole, or in
// parts of the cap.
func TestActiveRoom(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		maxActive     int32
		active        int64
		room          int64
		live, batchOf int
	}{
		{0, 1_000, math.MaxInt64, 50, 50},
		{5, 0, 5, 3, 3},
		{5, 4, 1, 5, 5},
		{5, 5, 0, 8, 5},
		{5, 9, 0, 1, 1}, // the cap was lowered under what runs
	} {
		c := broker.QueueConfig{MaxActive: tc.maxActive}
		if got := c.ActiveRoom(tc.active); got != tc.room {
			t.Errorf("MaxActive %d: ActiveRoom(%d) = %d, want %d", tc.maxActive, tc.active, got, tc.room)
		}
		if got := c.BatchSize(tc.live); got != tc.batchOf {
			t.Errorf("MaxActive %d: BatchSize(%d) = %d, want %d", tc.maxActive, tc.live, got, tc.batchOf)
		}
	}
}
