package server_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestErrorsQuoteOnlyAPrefix: a request may carry a string of megabytes
// (a task id, a queue name, a cron spec, a page token), and an error about
// it must still reach the client as the error it is. In gRPC and gRPC-Web
// the message travels in a header (grpc-message), and a Go client refuses
// one of megabytes (HPACK: COMPRESSION_ERROR), so the caller saw a broken
// connection, a transient error, instead of invalid_argument or not_found.
// Every message stays short, whatever the format.
func TestErrorsQuoteOnlyAPrefix(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	ctx := context.Background()
	for _, run := range []struct {
		p    servertest.Protocol
		size int
	}{
		{servertest.GRPC, 11 << 20}, // past the 10 MB a Go client takes in headers
		{servertest.GRPCWeb, 64 << 10},
		{servertest.Connect, 64 << 10},
	} {
		p, huge := run.p, strings.Repeat("a", run.size)
		tasks := taskClient(t, s, p)
		admin := conveyorv1connect.NewAdminServiceClient(servertest.HTTPClient(), s.URL(), p.ClientOption())
		cases := []struct {
			name string
			call func() error
			code connect.Code
			says string
		}{
			{"Enqueue task_id", func() error {
				_, err := tasks.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t", TaskId: huge}))
				return err
			}, connect.CodeInvalidArgument, "task_id"},
			{"Enqueue queue", func() error {
				_, err := tasks.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t", Queue: huge}))
				return err
			}, connect.CodeInvalidArgument, "queue"},
			{"EnqueueTx depends_on", func() error {
				_, err := tasks.EnqueueTx(ctx, connect.NewRequest(&conveyorv1.EnqueueTxRequest{Items: []*conveyorv1.EnqueueRequest{{Type: "t",
					Options: &conveyorv1.TaskOptions{DependsOn: []*conveyorv1.TaskDependency{{TaskId: huge}}}}}}))
				return err
			}, connect.CodeInvalidArgument, "depends_on[0]"},
			{"GetTask id", func() error {
				_, err := tasks.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: huge}))
				return err
			}, connect.CodeNotFound, "not found"},
			{"CancelTask id", func() error {
				_, err := admin.CancelTask(ctx, connect.NewRequest(&conveyorv1.CancelTaskRequest{Id: huge}))
				return err
			}, connect.CodeNotFound, "not found"},
			{"ListTasks page_token", func() error {
				_, err := admin.ListTasks(ctx, connect.NewRequest(&conveyorv1.ListTasksRequest{Queue: "q", PageToken: huge}))
				return err
			}, connect.CodeInvalidArgument, "page token"},
			{"PauseQueue queue", func() error {
				_, err := admin.PauseQueue(ctx, connect.NewRequest(&conveyorv1.PauseQueueRequest{Queue: huge}))
				return err
			}, connect.CodeInvalidArgument, "queue"},
			{"CreateCron spec", func() error {
				_, err := admin.CreateCron(ctx, connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: &conveyorv1.CronEntry{Spec: huge, Type: "t"}}))
				return err
			}, connect.CodeInvalidArgument, "entry.spec"},
			{"GetCron id", func() error {
				_, err := admin.GetCron(ctx, connect.NewRequest(&conveyorv1.GetCronRequest{Id: huge}))
				return err
			}, connect.CodeNotFound, "not found"},
		}
		for _, tc := range cases {
			err := tc.call()
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != tc.code {
				t.Errorf("%s/%s: %.300v, want %v", p, tc.name, err, tc.code)
				continue
			}
			if !strings.Contains(ce.Message(), tc.says) || len(ce.Message()) > 1024 {
				t.Errorf("%s/%s: message of %d bytes %.200q, want a short one that says %q", p, tc.name, len(ce.Message()), ce.Message(), tc.says)
			}
		}
	}
}
