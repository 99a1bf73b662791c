package bolt_test

import (
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/conveyor-dev/conveyor/broker"
	"github.com/conveyor-dev/conveyor/broker/bolt"
	bt "github.com/conveyor-dev/conveyor/broker/brokertest"
)

// chainLinks is the length of the dependency chains below: at about 500
// bytes of stack per link, a cascade that recursed once per link would
// need some 5 MB, past cascadeMaxStack (a fatal error, not a panic; at
// the default limit of 1 GB, a chain of some two million links).
const chainLinks = 10_000

// cascadeMaxStack bounds the goroutine stacks while a chain ends.
const cascadeMaxStack = 1 << 20

// enqueueChain stores a chain of n BLOCKED tasks in queue q, each
// depending on the one before (the first on root) under onFailure, with
// EnqueueTx calls of 1000 items as a producer would, and returns the ids,
// which rise along the chain as the server's would.
func enqueueChain(t *testing.T, e broker.Broker, q, root string, n int, onFailure broker.OnFailure, mod func(*broker.NewTask)) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		ids[i] = bt.NewID()
	}
	prev := root
	for start := 0; start < n; start += 1000 {
		items := make([]broker.NewTask, min(1000, n-start))
		for i := range items {
			nt := bt.NewTask(q)
			nt.ID = ids[start+i]
			nt.DependsOn = []broker.Dependency{{TaskID: prev, OnFailure: onFailure}}
			if mod != nil {
				mod(&nt)
			}
			items[i] = nt
			prev = nt.ID
		}
		if _, err := e.EnqueueTx(t.Context(), broker.EnqueueParams{Now: bt.T0, Tasks: bt.WithStates(items, bt.T0)}); err != nil {
			t.Fatalf("EnqueueTx: %v", err)
		}
	}
	return ids
}

// TestLongCascade: a failure at the head of a long dependency chain ends
// the whole chain, in one critical section, without a stack that grows
// with the chain: CancelTask and DeleteTask on the root of a
// CASCADE_CANCEL chain, and an expiry that passes while a chain of
// ON_FAILURE_CONTINUE tasks waits (each archived task releases the next,
// whose expiry has passed too). Not parallel: the stack limit is the
// process's.
func TestLongCascade(t *testing.T) {
	defer debug.SetMaxStack(debug.SetMaxStack(cascadeMaxStack))
	for _, tc := range []struct {
		name string
		act  broker.Action // on the root; 0: none, the chain expires
	}{
		{"cancel", broker.ActionCancel},
		{"delete", broker.ActionDelete},
		{"expire", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := openEngine(t, bolt.Config{})
			root := bt.EnqueueOne(t, e, bt.T0, bt.NewTask("root"))
			want, onFailure, mod := broker.StateCanceled, broker.OnFailureCascadeCancel, func(*broker.NewTask) {}
			if tc.act == 0 {
				want, onFailure = broker.StateArchived, broker.OnFailureContinue
				// Each expires a little after the one before: the first
				// is archived first, and releases the next.
				n := 0
				mod = func(nt *broker.NewTask) {
					n++
					nt.ExpiresAt = bt.T0.Add(time.Second + time.Duration(n))
				}
			}
			ids := enqueueChain(t, e, "q", root.ID, chainLinks, onFailure, mod)
			bt.RequireCounts(t, e, "q", bt.Counts{broker.StateBlocked: chainLinks})
			if tc.act != 0 {
				res, err := e.Act(t.Context(), broker.ActParams{Action: tc.act, IDs: []string{root.ID}, Now: bt.T0})
				if err != nil || res[0].Err != nil {
					t.Fatalf("Act %v on the root: %v, %+v", tc.act, err, res)
				}
			} else {
				if _, err := e.PromoteDue(t.Context(), bt.T0.Add(time.Minute)); err != nil {
					t.Fatalf("PromoteDue: %v", err)
				}
			}
			bt.RequireCounts(t, e, "q", bt.Counts{want: chainLinks})
			last := bt.RequireState(t, e, ids[len(ids)-1], want)
			if tc.act != 0 && !strings.Contains(last.LastError, ids[len(ids)-2]) {
				t.Fatalf("the chain's last task: last error %q, want it to name the one before", last.LastError)
			}
		})
	}
}
