package server_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func taskClient(t testing.TB, s *servertest.Server, p servertest.Protocol, opts ...connect.ClientOption) conveyorv1connect.TaskServiceClient {
	t.Helper()
	hc := servertest.HTTPClient()
	if p == servertest.Connect {
		hc = servertest.HTTP1Client()
	}
	return conveyorv1connect.NewTaskServiceClient(hc, s.URL(), append([]connect.ClientOption{p.ClientOption()}, opts...)...)
}

func dur(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

// TestEnqueueValidation runs every validation rule of §6.1 through a real
// server, in each wire format.
func TestEnqueueValidation(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	future := timestamppb.New(time.Now().Add(time.Hour))
	cases := []struct {
		name    string
		req     *conveyorv1.EnqueueRequest
		code    connect.Code // 0: success
		message string       // substring of the error message
	}{
		{"minimal", &conveyorv1.EnqueueRequest{Type: "t"}, 0, ""},
		{"missing type", &conveyorv1.EnqueueRequest{}, connect.CodeInvalidArgument, "type is required"},
		{"queue with dots dashes underscores", &conveyorv1.EnqueueRequest{Type: "t", Queue: "a-b_c.d9"}, 0, ""},
		{"queue starting with dash", &conveyorv1.EnqueueRequest{Type: "t", Queue: "-a"}, connect.CodeInvalidArgument, "queue"},
		{"queue with space", &conveyorv1.EnqueueRequest{Type: "t", Queue: "a b"}, connect.CodeInvalidArgument, "queue"},
		{"queue with slash", &conveyorv1.EnqueueRequest{Type: "t", Queue: "a/b"}, connect.CodeInvalidArgument, "queue"},
		{"payload at limit", &conveyorv1.EnqueueRequest{Type: "t", Payload: make([]byte, 1<<20)}, 0, ""},
		{"payload over limit", &conveyorv1.EnqueueRequest{Type: "t", Payload: make([]byte, 1<<20+1)}, connect.CodeInvalidArgument, "payload"},
		{"negative max_retry", &conveyorv1.EnqueueRequest{Type: "t", Options: &conveyorv1.TaskOptions{MaxRetry: -1}}, connect.CodeInvalidArgument, "max_retry"},
		{"priority 9", &conveyorv1.EnqueueRequest{Type: "t", Options: &conveyorv1.TaskOptions{Priority: 9}}, 0, ""},
		{"priority 10", &conveyorv1.EnqueueRequest{Type: "t", Options: &conveyorv1.TaskOptions{Priority: 10}}, connect.CodeInvalidArgument, "priority"},
		{"priority -1", &conveyorv1.EnqueueRequest{Type: "t", Options: &conveyorv1.TaskOptions{Priority: -1}}, connect.CodeInvalidArgument, "priority"},
		{"process_at and process_in", &conveyorv1.EnqueueRequest{Type: "t", Options: &conveyorv1.TaskOptions{ProcessAt: future, ProcessIn: dur(time.Minute)}}, connect.CodeInvalidArgument, "process_at and options.process_in"},
		{"expires_at and expires_in", &conveyorv1.EnqueueRequest{Type: "t", Options: &conveyorv1.TaskOptions{ExpiresAt: future, ExpiresIn: dur(time.Minute)}}, connect.CodeInvalidArgument, "expires_at and options.expires_in"},
		{"group and process_in", &conveyorv1.EnqueueRequest{Type: "t", Options: &conveyorv1.TaskOptions{Group: "g", ProcessIn: dur(time.Minute)}}, connect.CodeInvalidArgument, "group"},
		{"group and concurrency_key", &conveyorv1.EnqueueRequest{Type: "t", Options: &conveyorv1.TaskOptions{Group: "g", ConcurrencyKey: "k"}}, connect.CodeInvalidArgument, "concurrency_key"},
		{"task_id not a ULID", &conveyorv1.EnqueueRequest{Type: "t", TaskId: "nope"}, connect.CodeInvalidArgument, "task_id"},
		{"negative timeout", &conveyorv1.EnqueueRequest{Type: "t", Options: &conveyorv1.TaskOptions{Timeout: dur(-time.Second)}}, connect.CodeInvalidArgument, "timeout"},
		{"negative process_in", &conveyorv1.EnqueueRequest{Type: "t", Options: &conveyorv1.TaskOptions{ProcessIn: dur(-time.Second)}}, connect.CodeInvalidArgument, "process_in"},
		{"unique_ttl without key", &conveyorv1.EnqueueRequest{Type: "t", Options: &conveyorv1.TaskOptions{UniqueTtl: dur(time.Minute)}}, connect.CodeInvalidArgument, "unique_ttl"},
		{"dependency not a ULID", &conveyorv1.EnqueueRequest{Type: "t", Options: &conveyorv1.TaskOptions{DependsOn: []*conveyorv1.TaskDependency{{TaskId: "x"}}}}, connect.CodeInvalidArgument, "depends_on[0]"},
		{"retry policy max below base", &conveyorv1.EnqueueRequest{Type: "t", Options: &conveyorv1.TaskOptions{RetryPolicy: &conveyorv1.RetryPolicy{Base: dur(time.Minute), Max: dur(time.Second)}}}, connect.CodeInvalidArgument, "retry_policy.max"},
	}
	for _, p := range servertest.Protocols {
		client := taskClient(t, s, p)
		for _, tc := range cases {
			t.Run(string(p)+"/"+tc.name, func(t *testing.T) {
				res, err := client.Enqueue(context.Background(), connect.NewRequest(tc.req))
				if tc.code == 0 {
					if err != nil {
						t.Fatalf("Enqueue: %v", err)
					}
					if res.Msg.GetTask().GetId() == "" {
						t.Fatal("no task id in the response")
					}
					return
				}
				if connect.CodeOf(err) != tc.code {
					t.Fatalf("code = %v (%v), want %v", connect.CodeOf(err), err, tc.code)
				}
				if !strings.Contains(err.Error(), tc.message) {
					t.Fatalf("message %q does not mention %q", err, tc.message)
				}
			})
		}
	}
}

// TestEnqueueDefaults checks every default the server applies, and that
// every option is stored and shown in TaskInfo.
func TestEnqueueDefaults(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	for _, p := range servertest.Protocols {
		t.Run(string(p), func(t *testing.T) {
			client := taskClient(t, s, p)
			ctx := context.Background()
			before := time.Now()
			res, err := client.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "email", Payload: []byte(`{"a":1}`)}))
			if err != nil {
				t.Fatal(err)
			}
			got := res.Msg.GetTask()
			if _, err := ulid.ParseStrict(got.GetId()); err != nil {
				t.Errorf("id %q is not a ULID: %v", got.GetId(), err)
			}
			if got.GetQueue() != "default" || got.GetPriority() != 4 || got.GetMaxRetry() != 25 ||
				got.GetState() != conveyorv1.TaskState_TASK_STATE_PENDING || got.GetContentType() != "application/json" {
				t.Errorf("defaults not applied: %v", got)
			}
			if got.GetEnqueuedAt().AsTime().Before(before.Add(-time.Second)) {
				t.Errorf("enqueued_at %v is before the call", got.GetEnqueuedAt().AsTime())
			}

			opts := &conveyorv1.TaskOptions{
				MaxRetry: 3, Timeout: dur(time.Minute), Deadline: timestamppb.New(time.Now().Add(time.Hour)),
				ProcessIn: dur(time.Hour), UniqueKey: "k-" + string(p), UniqueTtl: dur(time.Hour), Priority: 7,
				Retention: dur(time.Hour), ExpiresIn: dur(2 * time.Hour), ConcurrencyKey: "ck",
				RetryPolicy: &conveyorv1.RetryPolicy{Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_LINEAR, Base: dur(time.Second)},
			}
			res, err = client.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{
				Queue: "emails", Type: "email", Metadata: map[string]string{"traceparent": "00-1"}, Options: opts,
			}))
			if err != nil {
				t.Fatal(err)
			}
			got = res.Msg.GetTask()
			if got.GetState() != conveyorv1.TaskState_TASK_STATE_SCHEDULED {
				t.Errorf("state %v, want SCHEDULED", got.GetState())
			}
			if d := got.GetNextProcessAt().AsTime().Sub(before); d < 59*time.Minute || d > 61*time.Minute {
				t.Errorf("next_process_at is %s after the call, want about 1h", d)
			}
			if got.GetPriority() != 7 || got.GetMaxRetry() != 3 || got.GetConcurrencyKey() != "ck" {
				t.Errorf("options not applied: %v", got)
			}
			if !proto.Equal(got.GetOptions(), opts) {
				t.Errorf("options not shown verbatim:\n got %v\nwant %v", got.GetOptions(), opts)
			}
			if got.GetExpiresAt() == nil {
				t.Error("expires_in not resolved into expires_at")
			}
			fetched, err := client.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: got.GetId()}))
			if err != nil {
				t.Fatal(err)
			}
			if !proto.Equal(fetched.Msg, got) {
				t.Errorf("GetTask differs from the Enqueue response:\n got %v\nwant %v", fetched.Msg, got)
			}
		})
	}
}

func TestEnqueueIdempotencyAndUniqueness(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	for _, p := range servertest.Protocols {
		t.Run(string(p), func(t *testing.T) {
			client := taskClient(t, s, p)
			ctx := context.Background()
			id := ulid.Make().String()
			req := &conveyorv1.EnqueueRequest{TaskId: id, Type: "t"}
			res, err := client.Enqueue(ctx, connect.NewRequest(req))
			if err != nil || res.Msg.GetTask().GetId() != id {
				t.Fatalf("first enqueue: %v %v", res, err)
			}
			_, err = client.Enqueue(ctx, connect.NewRequest(req))
			if connect.CodeOf(err) != connect.CodeAlreadyExists {
				t.Fatalf("repeat task_id: %v, want already_exists", err)
			}
			uk := &conveyorv1.TaskOptions{UniqueKey: "once-" + string(p)}
			if _, err := client.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t", Options: uk})); err != nil {
				t.Fatal(err)
			}
			_, err = client.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t", Options: uk}))
			if connect.CodeOf(err) != connect.CodeAlreadyExists || !strings.Contains(err.Error(), "unique_key") {
				t.Fatalf("repeat unique_key: %v, want already_exists naming unique_key", err)
			}
		})
	}
}

// TestEnqueueGroupWithDependencies: a grouped task with dependencies waits
// BLOCKED for them (it joins its group once they succeed), and its
// dependencies are checked as any task's.
func TestEnqueueGroupWithDependencies(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	client := taskClient(t, s, servertest.Protocols[0])
	ctx := context.Background()
	a, err := client.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "other", Type: "t"}))
	if err != nil {
		t.Fatal(err)
	}
	opts := func(id string) *conveyorv1.TaskOptions {
		return &conveyorv1.TaskOptions{Group: "g", DependsOn: []*conveyorv1.TaskDependency{{TaskId: id}}}
	}
	b, err := client.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t", Options: opts(a.Msg.GetTask().GetId())}))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Msg.GetTask().GetState(); got != conveyorv1.TaskState_TASK_STATE_BLOCKED {
		t.Fatalf("a grouped task with a pending dependency starts %s, want BLOCKED", got)
	}
	_, err = client.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t", Options: opts(ulid.Make().String())}))
	if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "depends_on[0]") {
		t.Fatalf("a grouped task with an unknown dependency: %v, want invalid_argument naming depends_on[0]", err)
	}
}

func TestEnqueueBatchAndTx(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	for _, p := range servertest.Protocols {
		t.Run(string(p), func(t *testing.T) {
			client := taskClient(t, s, p)
			ctx := context.Background()
			uk := "batch-" + string(p)
			batch, err := client.EnqueueBatch(ctx, connect.NewRequest(&conveyorv1.EnqueueBatchRequest{Items: []*conveyorv1.EnqueueRequest{
				{Type: "a"},
				{Type: ""}, // invalid
				{Type: "b", Options: &conveyorv1.TaskOptions{UniqueKey: uk}},
				{Type: "c", Options: &conveyorv1.TaskOptions{UniqueKey: uk}}, // collides with the item before
			}}))
			if err != nil {
				t.Fatal(err)
			}
			r := batch.Msg.GetResults()
			if len(r) != 4 || r[0].GetTask() == nil || r[1].GetError() == "" || r[2].GetTask() == nil || r[3].GetError() == "" {
				t.Fatalf("per-item results wrong: %v", r)
			}
			if !strings.Contains(r[1].GetError(), "type") || !strings.Contains(r[3].GetError(), "unique_key") {
				t.Errorf("per-item errors do not name the field: %q, %q", r[1].GetError(), r[3].GetError())
			}
			if r[0].GetCode() != "" || r[1].GetCode() != "invalid_argument" || r[3].GetCode() != "already_exists" {
				t.Errorf("per-item codes = %q %q %q, want \"\", invalid_argument, already_exists", r[0].GetCode(), r[1].GetCode(), r[3].GetCode())
			}
			for _, n := range []int{0, 1001} {
				_, err := client.EnqueueBatch(ctx, connect.NewRequest(&conveyorv1.EnqueueBatchRequest{Items: make([]*conveyorv1.EnqueueRequest, n)}))
				if connect.CodeOf(err) != connect.CodeInvalidArgument {
					t.Errorf("batch of %d: %v, want invalid_argument", n, err)
				}
			}

			// EnqueueTx: two items sharing a unique key fail the call and commit nothing.
			fresh := ulid.Make().String()
			_, err = client.EnqueueTx(ctx, connect.NewRequest(&conveyorv1.EnqueueTxRequest{Items: []*conveyorv1.EnqueueRequest{
				{TaskId: fresh, Type: "a"},
				{Type: "b", Options: &conveyorv1.TaskOptions{UniqueKey: "tx-" + string(p)}},
				{Type: "c", Options: &conveyorv1.TaskOptions{UniqueKey: "tx-" + string(p)}},
			}}))
			if connect.CodeOf(err) != connect.CodeAlreadyExists {
				t.Fatalf("tx with colliding items: %v, want already_exists", err)
			}
			if _, err := client.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: fresh})); connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("an item of a failed tx was committed: %v", err)
			}
			// A validation error fails the whole call too.
			_, err = client.EnqueueTx(ctx, connect.NewRequest(&conveyorv1.EnqueueTxRequest{Items: []*conveyorv1.EnqueueRequest{
				{TaskId: fresh, Type: "a"}, {Type: "b", Options: &conveyorv1.TaskOptions{Priority: 42}},
			}}))
			if connect.CodeOf(err) != connect.CodeInvalidArgument || !strings.Contains(err.Error(), "items[1]") {
				t.Fatalf("tx with an invalid item: %v, want invalid_argument naming items[1]", err)
			}
			// An existing task_id is a no-op that returns the task, in request order.
			existing := r[0].GetTask()
			tx, err := client.EnqueueTx(ctx, connect.NewRequest(&conveyorv1.EnqueueTxRequest{Items: []*conveyorv1.EnqueueRequest{
				{TaskId: fresh, Type: "new"}, {TaskId: existing.GetId(), Type: "ignored"}, {Type: "also-new"},
			}}))
			if err != nil {
				t.Fatal(err)
			}
			tasks := tx.Msg.GetTasks()
			if len(tasks) != 3 || tasks[0].GetId() != fresh || tasks[0].GetType() != "new" ||
				tasks[1].GetId() != existing.GetId() || tasks[1].GetType() != "a" || tasks[2].GetType() != "also-new" {
				t.Fatalf("tx tasks wrong: %v", tasks)
			}
		})
	}
}

func TestGetTaskErrors(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	for _, p := range servertest.Protocols {
		client := taskClient(t, s, p)
		_, err := client.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{}))
		if connect.CodeOf(err) != connect.CodeInvalidArgument {
			t.Errorf("%s: empty id: %v", p, err)
		}
		_, err = client.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: ulid.Make().String()}))
		if connect.CodeOf(err) != connect.CodeNotFound {
			t.Errorf("%s: unknown id: %v", p, err)
		}
	}
}

func TestAuth(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{Token: "s3cret"})
	for _, p := range servertest.Protocols {
		for _, tc := range []struct {
			name  string
			opts  []connect.ClientOption
			valid bool
		}{
			{"missing", nil, false},
			{"wrong", []connect.ClientOption{servertest.BearerToken("nope")}, false},
			{"right", []connect.ClientOption{servertest.BearerToken("s3cret")}, true},
			{"right, lower-case scheme", []connect.ClientOption{connect.WithInterceptors(rawAuth("bearer s3cret"))}, true},
			{"no scheme", []connect.ClientOption{connect.WithInterceptors(rawAuth("s3cret"))}, false},
		} {
			client := taskClient(t, s, p, tc.opts...)
			_, err := client.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t"}))
			if tc.valid && err != nil {
				t.Errorf("%s/%s: %v", p, tc.name, err)
			}
			if !tc.valid && connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Errorf("%s/%s: %v, want unauthenticated", p, tc.name, err)
			}
		}
	}
}

// TestAuthBeforeBody: a call without the token is refused for that, in
// its own protocol, before the server reads what it sent: a body that
// would not decode, or one past the size limit, changes nothing.
func TestAuthBeforeBody(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{Token: "s3cret"})
	url := s.URL() + conveyorv1connect.TaskServiceEnqueueProcedure
	for _, tc := range []struct {
		name, contentType string
		body              []byte
	}{
		{"connect, garbage JSON", "application/json", []byte("{not json")},
		{"connect, past the size limit", "application/json", bytes.Repeat([]byte(" "), server.MaxRequestBytes+1)},
		{"grpc, garbage", "application/grpc", []byte{0, 0, 0, 0, 3, 0xff, 0xff, 0xff}},
	} {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", tc.contentType)
		if tc.contentType == "application/grpc" {
			req.Header.Set("TE", "trailers")
		}
		res, err := servertest.HTTPClient().Do(req)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		switch tc.contentType {
		case "application/grpc":
			if code := res.Trailer.Get("Grpc-Status") + res.Header.Get("Grpc-Status"); code != "16" {
				t.Errorf("%s: grpc-status %q (%s), want 16 (unauthenticated)", tc.name, code, res.Header.Get("Grpc-Message"))
			}
		default:
			if res.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"unauthenticated"`) ||
				!strings.Contains(string(body), "missing bearer token") {
				t.Errorf("%s: %d %s, want 401 unauthenticated naming the missing token", tc.name, res.StatusCode, body)
			}
		}
	}
}

func TestRemoteListenNeedsToken(t *testing.T) {
	t.Parallel()
	_, err := server.New(server.Config{Listen: "0.0.0.0:0"})
	if err == nil || !strings.Contains(err.Error(), "--allow-remote") {
		t.Fatalf("non-loopback listen without token: %v", err)
	}
	if _, err := server.New(server.Config{Listen: "0.0.0.0:0", Token: "t"}); err != nil {
		t.Fatalf("with a token: %v", err)
	}
	if _, err := server.New(server.Config{Listen: "0.0.0.0:0", AllowRemote: true}); err != nil {
		t.Fatalf("with --allow-remote: %v", err)
	}
	if _, err := server.New(server.Config{Listen: "[::1]:0"}); err != nil {
		t.Fatalf("ipv6 loopback: %v", err)
	}
}

// rawAuth sends a verbatim Authorization header on unary calls.
type rawAuth string

func (a rawAuth) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", string(a))
		return next(ctx, req)
	}
}

func (a rawAuth) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}

func (a rawAuth) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// TestQueueLimit: past the number of queues the engine can tell apart, a
// new queue is refused with resource_exhausted naming it, in every enqueue
// path, while queues it knows still take tasks.
func TestQueueLimit(t *testing.T) {
	t.Parallel()
	s := servertest.StartBolt(t, server.Config{}) // the embedded engine's own limit
	client := taskClient(t, s, servertest.GRPC)
	ctx := context.Background()
	const limit = 1<<16 - 1
	for made := 0; made < limit; {
		items := make([]*conveyorv1.EnqueueRequest, min(server.MaxBatchItems, limit-made))
		for i := range items {
			items[i] = &conveyorv1.EnqueueRequest{Queue: fmt.Sprintf("q%d", made+i), Type: "t"}
		}
		res, err := client.EnqueueBatch(ctx, connect.NewRequest(&conveyorv1.EnqueueBatchRequest{Items: items}))
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res.Msg.GetResults() {
			if r.GetError() != "" {
				t.Fatalf("queue %d of %d: %s", made+i, limit, r.GetError())
			}
		}
		made += len(items)
	}
	isFull := func(what, code, msg string) {
		t.Helper()
		if code != connect.CodeResourceExhausted.String() || !strings.Contains(msg, `queue "one-too-many"`) {
			t.Errorf("%s: %v %q, want resource_exhausted naming the queue", what, code, msg)
		}
	}
	_, err := client.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Queue: "one-too-many", Type: "t"}))
	isFull("Enqueue", connect.CodeOf(err).String(), err.Error())
	_, err = client.EnqueueTx(ctx, connect.NewRequest(&conveyorv1.EnqueueTxRequest{Items: []*conveyorv1.EnqueueRequest{{Queue: "one-too-many", Type: "t"}}}))
	isFull("EnqueueTx", connect.CodeOf(err).String(), err.Error())
	res, err := client.EnqueueBatch(ctx, connect.NewRequest(&conveyorv1.EnqueueBatchRequest{Items: []*conveyorv1.EnqueueRequest{{Queue: "one-too-many", Type: "t"}, {Queue: "q7", Type: "t"}}}))
	if err != nil {
		t.Fatal(err)
	}
	r := res.Msg.GetResults()
	isFull("EnqueueBatch item", r[0].GetCode(), r[0].GetError())
	if r[1].GetTask().GetId() == "" {
		t.Errorf("a known queue's item was refused: %v", r[1])
	}
}

// TestPayloadVerbatim: the server stores and returns a payload's bytes
// as they were sent, whatever they are, with the content_type given (§3),
// across wire formats: enqueued in one, read in every other.
func TestPayloadVerbatim(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	payload := make([]byte, 256)
	for i := range payload {
		payload[i] = byte(i)
	}
	ctx := context.Background()
	for _, in := range servertest.Protocols {
		res, err := taskClient(t, s, in).Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t",
			Payload: payload, ContentType: "application/x-protobuf"}))
		if err != nil {
			t.Fatal(err)
		}
		for _, out := range servertest.Protocols {
			got, err := taskClient(t, s, out).GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: res.Msg.GetTask().GetId()}))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Msg.GetPayload(), payload) || got.Msg.GetContentType() != "application/x-protobuf" {
				t.Errorf("enqueued in %s, read in %s: payload %x, content_type %q", in, out, got.Msg.GetPayload(), got.Msg.GetContentType())
			}
		}
	}
}

// TestEnqueueBatchAndTxRepeatIDs: in EnqueueBatch a task_id already used,
// by a stored task or an earlier item, fails that item alone with
// already_exists; in EnqueueTx it is a no-op that answers the task as it
// is (§6.1), the rest committed.
func TestEnqueueBatchAndTxRepeatIDs(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	client := taskClient(t, s, servertest.GRPC)
	ctx := context.Background()
	stored := enqueueN(t, client, "q", "stored", 1)[0]
	fresh := ulid.Make().String()
	batch, err := client.EnqueueBatch(ctx, connect.NewRequest(&conveyorv1.EnqueueBatchRequest{Items: []*conveyorv1.EnqueueRequest{
		{TaskId: stored, Type: "t"}, {TaskId: fresh, Type: "first"}, {TaskId: fresh, Type: "second"}, {Type: "t"},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	r := batch.Msg.GetResults()
	if r[0].GetCode() != "already_exists" || r[1].GetTask().GetType() != "first" || r[2].GetCode() != "already_exists" || r[3].GetTask() == nil {
		t.Fatalf("batch results %v; want already_exists for items 0 and 2", r)
	}
	again := ulid.Make().String()
	tx, err := client.EnqueueTx(ctx, connect.NewRequest(&conveyorv1.EnqueueTxRequest{Items: []*conveyorv1.EnqueueRequest{
		{TaskId: stored, Type: "t"}, {TaskId: again, Type: "first"}, {TaskId: again, Type: "second"},
	}}))
	if err != nil {
		t.Fatal(err)
	}
	if got := tx.Msg.GetTasks(); len(got) != 3 || got[0].GetType() != "stored" || got[1].GetType() != "first" ||
		got[2].GetId() != again || got[2].GetType() != "first" {
		t.Fatalf("tx tasks %v; want the stored task, then the new one twice", got)
	}
}
