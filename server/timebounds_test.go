package server_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestExtremeTimesMeanWhatTheySay enqueues tasks with the largest and
// smallest times and durations the protocol's types hold: each either
// means what it says (far future stays far future, a long-past process_at
// is due now) and never wraps around.
func TestExtremeTimesMeanWhatTheySay(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	ctx := context.Background()
	y9999 := timestamppb.New(time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC))
	tenKYears := &durationpb.Duration{Seconds: 315_576_000_000} // the largest valid Duration
	cases := []struct {
		name string
		opts *conveyorv1.TaskOptions
		want conveyorv1.TaskState
	}{
		{"process_at 2300", &conveyorv1.TaskOptions{ProcessAt: timestamppb.New(time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC))}, conveyorv1.TaskState_TASK_STATE_SCHEDULED},
		{"process_at 1600", &conveyorv1.TaskOptions{ProcessAt: timestamppb.New(time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC))}, conveyorv1.TaskState_TASK_STATE_PENDING},
		{"process_in 10000 years", &conveyorv1.TaskOptions{ProcessIn: tenKYears}, conveyorv1.TaskState_TASK_STATE_SCHEDULED},
		{"expires_at 9999", &conveyorv1.TaskOptions{ExpiresAt: y9999}, conveyorv1.TaskState_TASK_STATE_PENDING},
		{"expires_in 10000 years", &conveyorv1.TaskOptions{ExpiresIn: tenKYears}, conveyorv1.TaskState_TASK_STATE_PENDING},
		{"deadline 9999, timeout 10000 years", &conveyorv1.TaskOptions{Deadline: y9999, Timeout: tenKYears}, conveyorv1.TaskState_TASK_STATE_PENDING},
	}
	for _, tc := range cases {
		res, err := tasks.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "edge", Type: tc.name, Options: tc.opts}))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		id := res.Msg.GetTask().GetId()
		// Give the timer loops a turn: a wrapped expiry would archive now.
		servertest.Eventually(t, 5*time.Second, "the promoter ran", func() bool {
			got, err := tasks.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
			return err == nil && got.Msg.GetState() == tc.want
		})
	}
	// The pending tasks are dispatched with a sane deadline: the lease's.
	w, welcome, err := openSession(t, s, servertest.GRPC, &conveyorv1.Hello{Queues: map[string]int32{"edge": 1}, Concurrency: 10})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		d := w.next(10 * time.Second).GetDispatch()
		dl := d.GetDeadline().AsTime()
		if dl.Before(time.Now()) || dl.After(time.Now().Add(welcome.GetLeaseTtl().AsDuration()+time.Minute)) {
			t.Fatalf("%s dispatched with deadline %v, want the lease expiry", d.GetTask().GetType(), dl)
		}
	}
}
