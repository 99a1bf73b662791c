package scheduler

import (
	"time"

	"github.com/conveyor-dev/conveyor/broker"
)

// Default policy of aggregation groups (CONTRACT.md): a group fires at
// whichever comes first of DefaultGroupMaxSize members, DefaultGroupMaxDelay
// after its first member and DefaultGroupGracePeriod after its latest.
const (
	DefaultGroupMaxSize     = 100
	DefaultGroupMaxDelay    = 30 * time.Second
	DefaultGroupGracePeriod = 5 * time.Second
)

// DefaultGroupPolicy is the default group policy as one value.
func DefaultGroupPolicy() broker.GroupPolicy {
	return broker.GroupPolicy{MaxSize: DefaultGroupMaxSize, MaxDelay: DefaultGroupMaxDelay, GracePeriod: DefaultGroupGracePeriod}
}
