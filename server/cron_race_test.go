package server_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// beforeFireBroker runs beforeFire once, after the cron loop read an entry
// and built its fire's task, and before that fire is applied.
type beforeFireBroker struct {
	broker.Broker
	once       sync.Once
	beforeFire func()
}

func (b *beforeFireBroker) FireCron(ctx context.Context, f broker.CronFire) (*broker.Task, error) {
	if !f.Skip {
		b.once.Do(b.beforeFire)
	}
	return b.Broker.FireCron(ctx, f)
}

// TestCronFireAfterMaskedUpdateUsesNewTemplate: a masked UpdateCron that
// leaves spec keeps the next run, so it no longer fences off a fire the
// cron loop built from the entry it read before the update. A fire applied
// after the update returned must enqueue the template the update stored
// (CONTRACT: a fire enqueues the entry's payload), at the time already set.
func TestCronFireAfterMaskedUpdateUsesNewTemplate(t *testing.T) {
	t.Parallel()
	fb := &beforeFireBroker{}
	s := startWrapped(t, server.Config{}, func(b broker.Broker) broker.Broker { fb.Broker = b; return fb })
	admin := adminClient(t, s)
	updated := make(chan struct{})
	fb.beforeFire = func() {
		defer close(updated)
		_, err := admin.UpdateCron(context.Background(), connect.NewRequest(&conveyorv1.UpdateCronRequest{
			Entry:      &conveyorv1.CronEntry{Id: "stale", Payload: []byte("new")},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"payload"}}}))
		if err != nil {
			t.Errorf("UpdateCron: %v", err)
		}
	}
	created, err := admin.CreateCron(context.Background(), connect.NewRequest(&conveyorv1.CreateCronRequest{
		Entry: &conveyorv1.CronEntry{Id: "stale", Spec: "@every 1s", Queue: "stale", Type: "tick", Payload: []byte("old")}}))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-updated:
	case <-time.After(20 * time.Second):
		t.Fatal("the entry never fired")
	}
	tasks := taskClient(t, s, servertest.GRPC)
	want := created.Msg.GetNextRunAt().AsTime().UTC().Format(time.RFC3339)
	var first *conveyorv1.TaskInfo
	servertest.Eventually(t, 10*time.Second, "the fire for "+want+" and the next", func() bool {
		page, err := admin.ListTasks(context.Background(), connect.NewRequest(&conveyorv1.ListTasksRequest{Queue: "stale", PageSize: 100}))
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Msg.GetTasks()) < 2 {
			return false
		}
		for _, brief := range page.Msg.GetTasks() {
			res, err := tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: brief.GetId()}))
			if err != nil {
				t.Fatal(err)
			}
			if res.Msg.GetMetadata()[server.CronFireKey] == want {
				first = res.Msg
			}
		}
		return true
	})
	if first == nil {
		t.Fatalf("no task fired for %s, the run set before the update", want)
	}
	if string(first.GetPayload()) != "new" {
		t.Errorf("the fire for %s, applied after UpdateCron stored payload %q, enqueued payload %q", want, "new", first.GetPayload())
	}
}

// beforeUpdateBroker runs beforeUpdate once, before the first UpdateCron
// that reaches the engine once armed.
type beforeUpdateBroker struct {
	broker.Broker
	mu           sync.Mutex
	beforeUpdate func()
}

func (b *beforeUpdateBroker) UpdateCron(ctx context.Context, id string, update func(broker.CronEntry) (broker.CronEntry, error)) (broker.CronEntry, error) {
	b.mu.Lock()
	hook := b.beforeUpdate
	b.beforeUpdate = nil
	b.mu.Unlock()
	if hook != nil {
		hook()
	}
	return b.Broker.UpdateCron(ctx, id, update)
}

// TestCronResumeFollowsSpecChangedMeanwhile: ResumeCron parses the spec
// before the engine's step, so a spec changed between the two must make it
// start again: the entry resumes on the schedule it has once resumed.
func TestCronResumeFollowsSpecChangedMeanwhile(t *testing.T) {
	t.Parallel()
	ub := &beforeUpdateBroker{}
	s := startWrapped(t, server.Config{}, func(b broker.Broker) broker.Broker { ub.Broker = b; return ub })
	admin := adminClient(t, s)
	_, err := admin.CreateCron(context.Background(), connect.NewRequest(&conveyorv1.CreateCronRequest{
		Entry: &conveyorv1.CronEntry{Id: "moved", Spec: "@every 1h", Type: "tick", Paused: true}}))
	if err != nil {
		t.Fatal(err)
	}
	ub.mu.Lock()
	ub.beforeUpdate = func() {
		_, err := ub.Broker.UpdateCron(context.Background(), "moved", func(e broker.CronEntry) (broker.CronEntry, error) {
			e.Spec = "@every 24h"
			return e, nil
		})
		if err != nil {
			t.Errorf("changing the spec under the resume: %v", err)
		}
	}
	ub.mu.Unlock()
	res, err := admin.ResumeCron(context.Background(), connect.NewRequest(&conveyorv1.ResumeCronRequest{Id: "moved"}))
	if err != nil {
		t.Fatal(err)
	}
	next := time.Until(res.Msg.GetNextRunAt().AsTime())
	if res.Msg.GetPaused() || res.Msg.GetSpec() != "@every 24h" || next < 23*time.Hour || next > 24*time.Hour {
		t.Fatalf("resumed: %v, next run in %s; want it running on @every 24h, its next run about 24h away", res.Msg, next)
	}
}
