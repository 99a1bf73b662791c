package broker_test

import (
	"testing"

	"github.com/conveyor-dev/conveyor/broker"
)

// TestDependencyOutcome states the rule of a dependency's end for each
// policy: a success satisfies every dependent; a failure (ARCHIVED,
// CANCELED) satisfies one that continues, cancels one that cascades and
// blocks any other; a dependency still live keeps it waiting.
func TestDependencyOutcome(t *testing.T) {
	t.Parallel()
	policies := []broker.OnFailure{broker.OnFailureDefault, broker.OnFailureBlock, broker.OnFailureCascadeCancel, broker.OnFailureContinue}
	want := map[broker.State][4]broker.DepOutcome{
		broker.StateCompleted: {broker.DepSatisfied, broker.DepSatisfied, broker.DepSatisfied, broker.DepSatisfied},
		broker.StateArchived:  {broker.DepBlocks, broker.DepBlocks, broker.DepCancels, broker.DepSatisfied},
		broker.StateCanceled:  {broker.DepBlocks, broker.DepBlocks, broker.DepCancels, broker.DepSatisfied},
	}
	for s := broker.StateScheduled; s < broker.NumStates; s++ {
		for i, p := range policies {
			w := broker.DepWaits
			if row, ok := want[s]; ok {
				w = row[i]
			}
			if got := broker.DependencyOutcome(p, s); got != w {
				t.Errorf("DependencyOutcome(%d, %s) = %d, want %d", p, s, got, w)
			}
		}
	}
}
