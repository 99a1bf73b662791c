package bench

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// The task shapes a run can use, besides the harness's plain tasks. They
// measure what the workflow options cost next to the plain workloads:
//
//   - keys (W3): each task has one of Keys concurrency keys, limit 1, so at
//     most Keys tasks run at once whatever the worker's concurrency;
//   - groups (W3, MEM): tasks in aggregation groups of GroupSize. W3
//     drains them as BatchDispatch (HandleBatch); MEM holds them
//     AGGREGATING under a policy that does not fire during the run;
//   - blocked (MEM): every task depends on one parent that does not run
//     during the run, so they are all BLOCKED;
//   - typed (W3): the tasks are of typedKinds types in turn, worked by as
//     many workers, each with a handler for one type only (routing by
//     type), sharing --concurrency;
//   - once (W3, W4): every task is at most once: each attempt asks the
//     server to authorize its start before it runs.
const (
	ShapePlain   = ""
	ShapeKeys    = "keys"
	ShapeGroups  = "groups"
	ShapeBlocked = "blocked"
	ShapeTyped   = "typed"
	ShapeOnce    = "once"
)

// typedKinds is how many types, and workers, the typed shape has.
const typedKinds = 4

// taskType is the type of task seq.
func (r *runner) taskType(seq int) string {
	if r.cfg.Shape == ShapeTyped {
		return typedType(seq % typedKinds)
	}
	return benchType
}

func typedType(i int) string { return fmt.Sprintf("%s.t%d", benchType, i) }

// maxGroupSize is the server's bound on a group policy's max_size.
const maxGroupSize = 10_000

func checkShape(c *Config) error {
	if c.Shape == ShapeGroups && c.Workload == "MEM" && c.GroupSize >= maxGroupSize {
		return fmt.Errorf("MEM holds groups below %d members; --group-size %d would fire them", maxGroupSize, c.GroupSize)
	}
	ok := map[string][]string{ShapePlain: {"W1", "W2", "W3", "W4", "MEM"}, ShapeKeys: {"W3"},
		ShapeGroups: {"W3", "MEM"}, ShapeBlocked: {"MEM"}, ShapeTyped: {"W3"}, ShapeOnce: {"W3", "W4"}}[c.Shape]
	for _, w := range ok {
		if w == c.Workload {
			return nil
		}
	}
	if ok == nil {
		return fmt.Errorf("unknown shape %q: want keys, groups, blocked, typed or once", c.Shape)
	}
	return fmt.Errorf("shape %q applies to %v, not %s", c.Shape, ok, c.Workload)
}

// prepareShape configures the bench queue for the shape, before the
// prefill: the group policy, or the parent the blocked tasks wait for.
func (r *runner) prepareShape(ctx context.Context) error {
	switch r.cfg.Shape {
	case ShapeGroups:
		policy := &conveyorv1.GroupPolicy{MaxSize: int32(r.cfg.GroupSize),
			MaxDelay: durationpb.New(time.Second), GracePeriod: durationpb.New(time.Second)}
		if r.cfg.Workload == "MEM" { // hold every group for the whole run
			policy.MaxSize = maxGroupSize
			policy.MaxDelay, policy.GracePeriod = durationpb.New(24*time.Hour), durationpb.New(24*time.Hour)
		}
		_, err := r.admin().UpdateQueueConfig(ctx, connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{
			Config: &conveyorv1.QueueConfig{Queue: benchQueue, GroupPolicy: policy}}))
		return err
	case ShapeBlocked:
		parent, err := r.client.Enqueue(ctx, benchType, payload(0, 0), conveyor.Queue(benchQueue), conveyor.ProcessIn(24*time.Hour))
		if err != nil {
			return err
		}
		r.parent = parent.ID
	}
	return nil
}

// shapeOptions are the options of task seq for the shape.
func (r *runner) shapeOptions(seq int) []conveyor.TaskOption {
	opts := []conveyor.TaskOption{conveyor.Queue(benchQueue)}
	switch r.cfg.Shape {
	case ShapeKeys:
		opts = append(opts, conveyor.ConcurrencyKey(fmt.Sprintf("k%d", seq%r.cfg.Keys)))
	case ShapeGroups:
		opts = append(opts, conveyor.Group(fmt.Sprintf("g%d", seq/r.cfg.GroupSize)))
	case ShapeBlocked:
		opts = append(opts, conveyor.DependsOn(r.parent))
	case ShapeOnce:
		opts = append(opts, conveyor.AtMostOnce())
	}
	return opts
}
