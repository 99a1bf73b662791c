package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"testing"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// benchTasks is how many tasks BenchmarkAdminAtScale stores: 1,000,000,
// or CONVEYOR_BENCH_TASKS.
func benchTasks(b *testing.B) int {
	if v := os.Getenv("CONVEYOR_BENCH_TASKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 10_000 {
			b.Fatalf("CONVEYOR_BENCH_TASKS=%q: want a number of at least 10000", v)
		}
		return n
	}
	return 1_000_000
}

// BenchmarkAdminAtScale measures the operator's reads on a server that
// stores a million pending tasks of ten types: ListQueues, a page of 100
// of ListTasks at the start and half way through the listing, with and
// without a type filter, and a /metrics scrape. Each is one RPC (or GET)
// over loopback, so the figures include the transport.
func BenchmarkAdminAtScale(b *testing.B) {
	n := benchTasks(b)
	s := servertest.Start(b, server.Config{})
	tasks := taskClient(b, s, servertest.GRPC)
	prefill(b, tasks, n)
	admin := conveyorv1connect.NewAdminServiceClient(servertest.HTTPClient(), s.URL(), connect.WithGRPC())
	ctx := context.Background()
	deep := cursorAt(b, admin, &conveyorv1.ListTasksRequest{Queue: "big", State: conveyorv1.TaskState_TASK_STATE_PENDING}, n/2)
	deepTyped := cursorAt(b, admin, &conveyorv1.ListTasksRequest{Queue: "big", State: conveyorv1.TaskState_TASK_STATE_PENDING, Type: "t7"}, n/20)
	b.ResetTimer()
	b.Run("ListQueues", func(b *testing.B) {
		for b.Loop() {
			if _, err := admin.ListQueues(ctx, connect.NewRequest(&conveyorv1.ListQueuesRequest{})); err != nil {
				b.Fatal(err)
			}
		}
	})
	pages := []struct {
		name string
		req  *conveyorv1.ListTasksRequest
	}{
		{"ListTasks/first", &conveyorv1.ListTasksRequest{Queue: "big", State: conveyorv1.TaskState_TASK_STATE_PENDING, PageSize: 100}},
		{"ListTasks/deep", &conveyorv1.ListTasksRequest{Queue: "big", State: conveyorv1.TaskState_TASK_STATE_PENDING, PageSize: 100, PageToken: deep}},
		{"ListTasks/type/first", &conveyorv1.ListTasksRequest{Queue: "big", State: conveyorv1.TaskState_TASK_STATE_PENDING, PageSize: 100, Type: "t7"}},
		{"ListTasks/type/deep", &conveyorv1.ListTasksRequest{Queue: "big", State: conveyorv1.TaskState_TASK_STATE_PENDING, PageSize: 100, Type: "t7", PageToken: deepTyped}},
		{"ListTasks/allstates/deep", &conveyorv1.ListTasksRequest{Queue: "big", PageSize: 100, PageToken: deep}},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			for b.Loop() {
				res, err := admin.ListTasks(ctx, connect.NewRequest(p.req))
				if err != nil || len(res.Msg.GetTasks()) != 100 {
					b.Fatalf("ListTasks = %d tasks, %v", len(res.Msg.GetTasks()), err)
				}
			}
		})
	}
	b.Run("Metrics", func(b *testing.B) {
		for b.Loop() {
			res, err := http.Get(s.URL() + server.MetricsPath)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			_ = res.Body.Close()
			if res.StatusCode != http.StatusOK {
				b.Fatalf("GET /metrics: %d", res.StatusCode)
			}
		}
	})
}

// prefill stores n pending tasks in queue "big", of types t0..t9 in turn.
func prefill(b *testing.B, tasks conveyorv1connect.TaskServiceClient, n int) {
	b.Helper()
	items := make([]*conveyorv1.EnqueueRequest, 1000)
	for done := 0; done < n; done += len(items) {
		for i := range items {
			items[i] = &conveyorv1.EnqueueRequest{Queue: "big", Type: fmt.Sprintf("t%d", (done+i)%10),
				Payload: []byte(fmt.Sprintf(`{"n":%d,"pad":"0123456789012345678901234567890123456789012345678901234567890123"}`, done+i))}
		}
		if _, err := tasks.EnqueueBatch(context.Background(), connect.NewRequest(&conveyorv1.EnqueueBatchRequest{Items: items, Brief: true})); err != nil {
			b.Fatal(err)
		}
	}
}

// cursorAt pages through req's listing, 1000 at a time, and returns the
// page token after skip tasks.
func cursorAt(b *testing.B, admin conveyorv1connect.AdminServiceClient, req *conveyorv1.ListTasksRequest, skip int) string {
	b.Helper()
	req.PageSize = 1000
	token := ""
	for seen := 0; seen < skip; {
		req.PageToken = token
		res, err := admin.ListTasks(context.Background(), connect.NewRequest(req))
		if err != nil {
			b.Fatal(err)
		}
		seen += len(res.Msg.GetTasks())
		token = res.Msg.GetNextPageToken()
		if token == "" {
			b.Fatalf("the listing ended after %d tasks, before %d", seen, skip)
		}
	}
	return token
}
