package broker_test

import (
	"testing"

	"github.com/conveyor-dev/conveyor/broker"
)

// TestGroupPolicyFull states when a group fires by size: at MaxSize
// members (none when MaxSize is 0), or at MaxGroupBytes of specs, which
// every group has, whichever comes first.
func TestGroupPolicyFull(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		maxSize int32
		members int
		bytes   int64
		want    bool
	}{
		{"below both", 3, 2, broker.MaxGroupBytes - 1, false},
		{"at the size", 3, 3, 0, true},
		{"past the size (the policy was lowered)", 3, 5, 0, true},
		{"at the bytes", 100, 1, broker.MaxGroupBytes, true},
		{"no size: only the bytes", 0, 1_000_000, broker.MaxGroupBytes - 1, false},
		{"no size, at the bytes", 0, 1, broker.MaxGroupBytes, true},
	} {
		p := broker.GroupPolicy{MaxSize: tc.maxSize}
		if got := p.Full(tc.members, tc.bytes); got != tc.want {
			t.Errorf("%s: Full(%d, %d) with MaxSize %d = %v, want %v", tc.name, tc.members, tc.bytes, tc.maxSize, got, tc.want)
		}
	}
}
