package conveyor_test

import (
	"bytes"
	"context"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

var protocols = []conveyor.Protocol{conveyor.ProtocolGRPC, conveyor.ProtocolGRPCWeb, conveyor.ProtocolConnect}

func newClient(t *testing.T, url string, opts ...conveyor.Option) *conveyor.Client {
	t.Helper()
	c, err := conveyor.NewClient(url, opts...)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	return c
}

// serveStub returns a function that serves a stub service (what a
// generated New...Handler returns) on loopback over HTTP/1.1 and
// cleartext HTTP/2, as the server does, and returns its URL:
// serveStub(t)(conveyorv1connect.NewTaskServiceHandler(stub)).
func serveStub(t *testing.T) func(path string, h http.Handler) string {
	return func(path string, h http.Handler) string {
		t.Helper()
		mux := http.NewServeMux()
		mux.Handle(path, h)
		hs := httptest.NewUnstartedServer(mux)
		hs.Config.Protocols = new(http.Protocols)
		hs.Config.Protocols.SetHTTP1(true)
		hs.Config.Protocols.SetUnencryptedHTTP2(true)
		hs.Start()
		t.Cleanup(hs.Close)
		return hs.URL
	}
}

// forEachProtocol runs fn in a parallel subtest per wire format, with a
// client of s speaking it (and the token, if any).
func forEachProtocol(t *testing.T, s *servertest.Server, fn func(t *testing.T, c *conveyor.Client, p conveyor.Protocol)) {
	t.Helper()
	for _, p := range protocols {
		t.Run(p.String(), func(t *testing.T) {
			t.Parallel()
			fn(t, newClient(t, s.URL(), conveyor.WithProtocol(p), conveyor.WithToken(s.Config.Token)), p)
		})
	}
}

// withoutState returns deps with their output-only State cleared.
func withoutState(deps []conveyor.Dependency) []conveyor.Dependency {
	out := slices.Clone(deps)
	for i := range out {
		out[i].State = conveyor.TaskStateUnspecified
	}
	return out
}

func getTask(t *testing.T, c *conveyor.Client, id string) *conveyor.TaskInfo {
	t.Helper()
	info, err := c.GetTask(context.Background(), id)
	if err != nil {
		t.Fatalf("GetTask(%s): %v", id, err)
	}
	return info
}

func eq[T comparable](t *testing.T, name string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

func eqTime(t *testing.T, name string, got, want time.Time) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s = %v, want %v", name, got, want)
	}
}

// within checks that got lies in [lo, hi].
func within(t *testing.T, name string, got, lo, hi time.Time) {
	t.Helper()
	if got.Before(lo) || got.After(hi) {
		t.Errorf("%s = %v, want within [%v, %v]", name, got, lo, hi)
	}
}

func isErr(t *testing.T, what string, err, target error, msg string) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: %v, want %v", what, err, target)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Errorf("%s: message %q does not mention %q", what, err, msg)
	}
}

// TestEnqueueOptionsRoundTrip enqueues with every TaskOption and checks each
// one in the TaskInfo the server stored, in every wire format.
func TestEnqueueOptionsRoundTrip(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	forEachProtocol(t, s, func(t *testing.T, c *conveyor.Client, p conveyor.Protocol) {
		ctx := context.Background()
		queue := "opts-" + p.String()
		before := time.Now()
		deadline := before.Add(3 * time.Hour)
		id := ulid.Make().String()
		a, err := c.Enqueue(ctx, "resize", []byte{0, 1, 2, 0xff},
			conveyor.TaskID(id),
			conveyor.Queue(queue),
			conveyor.Metadata(map[string]string{"a": "1", "b": "2"}),
			conveyor.MetadataKV("b", "3"),
			conveyor.ContentType("application/octet-stream"),
			conveyor.MaxRetry(3),
			conveyor.Timeout(90*time.Second),
			conveyor.Deadline(deadline),
			conveyor.ProcessIn(time.Hour),
			conveyor.Unique("uk-"+queue, 10*time.Minute),
			conveyor.Priority(7),
			conveyor.Retention(0),
			conveyor.ExpiresIn(2*time.Hour),
			conveyor.ConcurrencyKey("ck"),
			conveyor.RetryPolicy(conveyor.RetryStrategyLinear, time.Second, time.Minute),
		)
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		after := time.Now()
		got := getTask(t, c, id)
		if !proto.Equal(got.Proto(), a.Proto()) {
			t.Errorf("GetTask differs from the Enqueue response:\n got %v\nwant %v", got.Proto(), a.Proto())
		}
		eq(t, "ID", got.ID, id)
		eq(t, "Queue", got.Queue, queue)
		eq(t, "Type", got.Type, "resize")
		eq(t, "State", got.State, conveyor.TaskStateScheduled)
		eq(t, "Priority", got.Priority, 7)
		eq(t, "MaxRetry", got.MaxRetry, 3)
		eq(t, "Retried", got.Retried, 0)
		eq(t, "ContentType", got.ContentType, "application/octet-stream")
		eq(t, "ConcurrencyKey", got.ConcurrencyKey, "ck")
		if !bytes.Equal(got.Payload, []byte{0, 1, 2, 0xff}) {
			t.Errorf("Payload = %x", got.Payload)
		}
		if want := map[string]string{"a": "1", "b": "3"}; !reflect.DeepEqual(got.Metadata, want) {
			t.Errorf("Metadata = %v, want %v", got.Metadata, want)
		}
		within(t, "EnqueuedAt", got.EnqueuedAt, before, after)
		within(t, "NextProcessAt", got.NextProcessAt, before.Add(time.Hour), after.Add(time.Hour))
		within(t, "ExpiresAt", got.ExpiresAt, before.Add(2*time.Hour), after.Add(2*time.Hour))

		o := got.Options
		eq(t, "Options.MaxRetry", o.MaxRetry, 3)
		eq(t, "Options.Timeout", o.Timeout, 90*time.Second)
		eqTime(t, "Options.Deadline", o.Deadline, deadline)
		eq(t, "Options.ProcessIn", o.ProcessIn, time.Hour)
		eq(t, "Options.UniqueKey", o.UniqueKey, "uk-"+queue)
		eq(t, "Options.UniqueTTL", o.UniqueTTL, 10*time.Minute)
		eq(t, "Options.Priority", o.Priority, 7)
		if o.Retention == nil || *o.Retention != 0 {
			t.Errorf("Options.Retention = %v, want an explicit 0", o.Retention)
		}
		if r := got.Proto().GetOptions().GetRetention(); r == nil || r.AsDuration() != 0 {
			t.Errorf("wire retention = %v, want an explicit 0s", r)
		}
		eq(t, "Options.ExpiresIn", o.ExpiresIn, 2*time.Hour)
		eq(t, "Options.ConcurrencyKey", o.ConcurrencyKey, "ck")
		eq(t, "Options.RetryStrategy", o.RetryStrategy, conveyor.RetryStrategyLinear)
		eq(t, "Options.RetryBase", o.RetryBase, time.Second)
		eq(t, "Options.RetryMax", o.RetryMax, time.Minute)

		// The options that exclude the first task's.
		other, err := c.Enqueue(ctx, "dep", nil, conveyor.Queue(queue))
		if err != nil {
			t.Fatal(err)
		}
		processAt := before.Add(90 * time.Minute)
		expiresAt := before.Add(4 * time.Hour)
		b, err := c.Enqueue(ctx, "after", []byte(`{}`), conveyor.Queue(queue),
			conveyor.ProcessAt(processAt), conveyor.ExpiresAt(expiresAt),
			conveyor.DependsOn(a.ID, conveyor.OnFailureCascadeCancel), conveyor.DependsOn(other.ID),
			conveyor.Unique("uk2-"+queue, 0), conveyor.Retention(36*time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		got = getTask(t, c, b.ID)
		eq(t, "State", got.State, conveyor.TaskStateBlocked)
		eq(t, "ContentType", got.ContentType, "application/json") // the server's default
		eq(t, "Priority", got.Priority, 4)
		eq(t, "MaxRetry", got.MaxRetry, 25)
		wantDeps := []conveyor.Dependency{{TaskID: a.ID, OnFailure: conveyor.OnFailureCascadeCancel}, {TaskID: other.ID}}
		// A server that reports each dependency's state (output only) may
		// fill Dependency.State; the rest is what the producer gave.
		if !reflect.DeepEqual(withoutState(got.DependsOn), wantDeps) || !reflect.DeepEqual(withoutState(got.Options.DependsOn), wantDeps) {
			t.Errorf("DependsOn = %v, Options.DependsOn = %v, want %v", got.DependsOn, got.Options.DependsOn, wantDeps)
		}
		eqTime(t, "Options.ProcessAt", got.Options.ProcessAt, processAt)
		eqTime(t, "Options.ExpiresAt", got.Options.ExpiresAt, expiresAt)
		eqTime(t, "ExpiresAt", got.ExpiresAt, expiresAt)
		eq(t, "Options.UniqueKey", got.Options.UniqueKey, "uk2-"+queue)
		eq(t, "Options.UniqueTTL", got.Options.UniqueTTL, 0)
		if got.Proto().GetOptions().GetUniqueTtl() != nil {
			t.Error("Unique(key, 0) sent a unique_ttl; want none (until completion)")
		}
		if got.Options.Retention == nil || *got.Options.Retention != 36*time.Hour {
			t.Errorf("Options.Retention = %v, want 36h", got.Options.Retention)
		}

		g, err := c.Enqueue(ctx, "agg", nil, conveyor.Queue(queue), conveyor.Group("g1"))
		if err != nil {
			t.Fatal(err)
		}
		got = getTask(t, c, g.ID)
		eq(t, "State", got.State, conveyor.TaskStateAggregating)
		eq(t, "Group", got.Group, "g1")
		eq(t, "Options.Group", got.Options.Group, "g1")

		plain, err := c.Enqueue(ctx, "plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		got = getTask(t, c, plain.ID)
		eq(t, "State", got.State, conveyor.TaskStatePending)
		eq(t, "Queue", got.Queue, "default")
		if !reflect.DeepEqual(got.Options, conveyor.TaskOptions{}) || got.Proto().GetOptions() != nil {
			t.Errorf("a task without options reports %+v", got.Options)
		}
	})
}

// TestTaskOptionsMapToProto checks, without a server, the wire field each
// option sets.
func TestTaskOptionsMapToProto(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	opts := func(o *conveyorv1.TaskOptions) *conveyorv1.EnqueueRequest {
		return &conveyorv1.EnqueueRequest{Type: "t", Options: o}
	}
	dur := durationpb.New
	cases := []struct {
		name string
		opt  conveyor.TaskOption
		want *conveyorv1.EnqueueRequest
	}{
		{"Queue", conveyor.Queue("q"), &conveyorv1.EnqueueRequest{Type: "t", Queue: "q"}},
		{"TaskID", conveyor.TaskID("01J"), &conveyorv1.EnqueueRequest{Type: "t", TaskId: "01J"}},
		{"Metadata", conveyor.Metadata(map[string]string{"k": "v"}), &conveyorv1.EnqueueRequest{Type: "t", Metadata: map[string]string{"k": "v"}}},
		{"MetadataKV", conveyor.MetadataKV("k", "v"), &conveyorv1.EnqueueRequest{Type: "t", Metadata: map[string]string{"k": "v"}}},
		{"ContentType", conveyor.ContentType("text/plain"), &conveyorv1.EnqueueRequest{Type: "t", ContentType: "text/plain"}},
		{"MaxRetry", conveyor.MaxRetry(2), opts(&conveyorv1.TaskOptions{MaxRetry: 2})},
		{"Timeout", conveyor.Timeout(time.Second), opts(&conveyorv1.TaskOptions{Timeout: dur(time.Second)})},
		{"Deadline", conveyor.Deadline(at), opts(&conveyorv1.TaskOptions{Deadline: timestamppb.New(at)})},
		{"Deadline zero", conveyor.Deadline(time.Time{}), opts(&conveyorv1.TaskOptions{})},
		{"ProcessAt", conveyor.ProcessAt(at), opts(&conveyorv1.TaskOptions{ProcessAt: timestamppb.New(at)})},
		{"ProcessIn", conveyor.ProcessIn(time.Minute), opts(&conveyorv1.TaskOptions{ProcessIn: dur(time.Minute)})},
		{"Unique", conveyor.Unique("k", time.Hour), opts(&conveyorv1.TaskOptions{UniqueKey: "k", UniqueTtl: dur(time.Hour)})},
		{"Unique until completion", conveyor.Unique("k", 0), opts(&conveyorv1.TaskOptions{UniqueKey: "k"})},
		{"Priority", conveyor.Priority(9), opts(&conveyorv1.TaskOptions{Priority: 9})},
		{"Retention", conveyor.Retention(time.Hour), opts(&conveyorv1.TaskOptions{Retention: dur(time.Hour)})},
		{"Retention zero", conveyor.Retention(0), opts(&conveyorv1.TaskOptions{Retention: &durationpb.Duration{}})},
		{"Group", conveyor.Group("g"), opts(&conveyorv1.TaskOptions{Group: "g"})},
		{"ExpiresIn", conveyor.ExpiresIn(time.Minute), opts(&conveyorv1.TaskOptions{ExpiresIn: dur(time.Minute)})},
		{"ExpiresAt", conveyor.ExpiresAt(at), opts(&conveyorv1.TaskOptions{ExpiresAt: timestamppb.New(at)})},
		{"DependsOn", conveyor.DependsOn("01J"), opts(&conveyorv1.TaskOptions{DependsOn: []*conveyorv1.TaskDependency{{TaskId: "01J"}}})},
		{"DependsOn continue", conveyor.DependsOn("01J", conveyor.OnFailureContinue), opts(&conveyorv1.TaskOptions{DependsOn: []*conveyorv1.TaskDependency{{TaskId: "01J", OnFailure: conveyorv1.OnFailure_ON_FAILURE_CONTINUE}}})},
		{"ConcurrencyKey", conveyor.ConcurrencyKey("c"), opts(&conveyorv1.TaskOptions{ConcurrencyKey: "c"})},
		{"RetryPolicy", conveyor.RetryPolicy(conveyor.RetryStrategyFixed, time.Second, 0), opts(&conveyorv1.TaskOptions{RetryPolicy: &conveyorv1.RetryPolicy{Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED, Base: dur(time.Second)}})},
		{"AtMostOnce", conveyor.AtMostOnce(), opts(&conveyorv1.TaskOptions{AtMostOnce: true})},
		{"nil", nil, &conveyorv1.EnqueueRequest{Type: "t"}},
	}
	for _, tc := range cases {
		if got := conveyor.NewTask("t", nil, tc.opt).Proto(); !proto.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	// Later options override earlier ones; metadata accumulates.
	got := conveyor.NewTask("t", nil, conveyor.Queue("a"), conveyor.Queue("b"),
		conveyor.MetadataKV("x", "1"), conveyor.Metadata(map[string]string{"y": "2"})).Proto()
	if got.GetQueue() != "b" || !reflect.DeepEqual(got.GetMetadata(), map[string]string{"x": "1", "y": "2"}) {
		t.Errorf("composed options: %v", got)
	}
	// Metadata copies its map.
	m := map[string]string{"k": "v"}
	opt := conveyor.Metadata(m)
	m["k"] = "changed"
	if v := conveyor.NewTask("t", nil, opt).Proto().GetMetadata()["k"]; v != "v" {
		t.Errorf("Metadata did not copy its map: %q", v)
	}
}

// TestOptionProgrammerErrors checks that the errors the SDK reports early
// match ErrInvalidArgument and never reach the network: the client points
// at a port nobody listens on, so a call would fail with ErrUnavailable.
func TestOptionProgrammerErrors(t *testing.T) {
	t.Parallel()
	c := newClient(t, "http://127.0.0.1:1")
	ctx := context.Background()
	cases := []struct {
		name string
		opt  conveyor.TaskOption
		msg  string
	}{
		{"two OnFailures", conveyor.DependsOn("x", conveyor.OnFailureBlock, conveyor.OnFailureContinue), "at most one OnFailure"},
	}
	if strconv.IntSize == 64 {
		big := math.MaxInt32
		big++
		cases = append(cases,
			struct {
				name string
				opt  conveyor.TaskOption
				msg  string
			}{"MaxRetry overflow", conveyor.MaxRetry(big), "MaxRetry(2147483648) is out of range"},
			struct {
				name string
				opt  conveyor.TaskOption
				msg  string
			}{"Priority overflow", conveyor.Priority(-big - 1), "Priority(-2147483649) is out of range"})
	}
	for _, tc := range cases {
		_, err := c.Enqueue(ctx, "t", nil, tc.opt)
		isErr(t, tc.name+": Enqueue", err, conveyor.ErrInvalidArgument, tc.msg)
		_, err = c.EnqueueTx(ctx, []*conveyor.Task{conveyor.NewTask("ok", nil), conveyor.NewTask("t", nil, tc.opt)})
		isErr(t, tc.name+": EnqueueTx", err, conveyor.ErrInvalidArgument, tc.msg)
		if !strings.Contains(err.Error(), "tasks[1]: ") {
			t.Errorf("%s: EnqueueTx error %q does not name tasks[1]", tc.name, err)
		}
		res, err := c.EnqueueBatch(ctx, []*conveyor.Task{conveyor.NewTask("t", nil, tc.opt)})
		if err != nil {
			t.Fatalf("%s: EnqueueBatch called the server: %v", tc.name, err)
		}
		isErr(t, tc.name+": EnqueueBatch item", res[0].Err, conveyor.ErrInvalidArgument, tc.msg)
	}
	// The unreachable server is reported as such.
	_, err := c.Enqueue(ctx, "t", nil)
	isErr(t, "Enqueue to a closed port", err, conveyor.ErrUnavailable, "unavailable")
}

func TestEnqueueBatch(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	forEachProtocol(t, s, func(t *testing.T, c *conveyor.Client, p conveyor.Protocol) {
		ctx := context.Background()
		uk := "batch-" + p.String()
		res, err := c.EnqueueBatch(ctx, []*conveyor.Task{
			conveyor.NewTask("a", []byte("1")),
			conveyor.NewTask("", nil), // the server requires a type
			conveyor.NewTask("b", []byte("2"), conveyor.Unique(uk, 0)),
			conveyor.NewTask("c", nil, conveyor.Unique(uk, 0)), // collides with the item before
			nil,
			conveyor.NewTask("d", nil, conveyor.DependsOn(ulid.Make().String(), conveyor.OnFailureBlock, conveyor.OnFailureContinue)),
			conveyor.NewTask("e", nil, conveyor.Priority(42)),
		})
		if err != nil {
			t.Fatalf("EnqueueBatch: %v", err)
		}
		if len(res) != 7 {
			t.Fatalf("%d results for 7 tasks", len(res))
		}
		for _, i := range []int{0, 2} {
			if res[i].Err != nil || res[i].Task == nil {
				t.Fatalf("results[%d] = %+v, want a task", i, res[i])
			}
		}
		eq(t, "results[0].Type", res[0].Task.Type, "a")
		eq(t, "results[2].Type", res[2].Task.Type, "b")
		if stored := getTask(t, c, res[2].Task.ID); string(stored.Payload) != "2" {
			t.Errorf("results[2] stored payload %q", stored.Payload)
		}
		for i, msg := range map[int]string{1: "type is required", 3: "unique_key", 4: "tasks[4] is nil", 5: "OnFailure", 6: "priority"} {
			if res[i].Task != nil || res[i].Err == nil || !strings.Contains(res[i].Err.Error(), msg) {
				t.Errorf("results[%d] = %+v, want an error mentioning %q", i, res[i], msg)
			}
		}
		// Each item's error matches its code's sentinel, whether the server
		// (1, 3, 6) or the SDK (4, 5) found it.
		for i, want := range map[int]error{1: conveyor.ErrInvalidArgument, 3: conveyor.ErrAlreadyExists,
			4: conveyor.ErrInvalidArgument, 5: conveyor.ErrInvalidArgument, 6: conveyor.ErrInvalidArgument} {
			if !errors.Is(res[i].Err, want) {
				t.Errorf("results[%d].Err = %v, want %v", i, res[i].Err, want)
			}
		}
		for _, i := range []int{1, 3, 6} {
			var ce *conveyor.Error
			if !errors.As(res[i].Err, &ce) || connect.CodeOf(res[i].Err) != ce.Code() || ce.Message() == "" ||
				ce.Error() != ce.Code().String()+": "+ce.Message() {
				t.Errorf("results[%d].Err = %#v, want an *Error with the server's code and message", i, res[i].Err)
			}
		}
		if errors.Is(res[3].Err, conveyor.ErrInvalidArgument) {
			t.Errorf("results[3].Err = %v matches ErrInvalidArgument too", res[3].Err)
		}

		_, err = c.EnqueueBatch(ctx, nil)
		isErr(t, "empty batch", err, conveyor.ErrInvalidArgument, "items")
		big := make([]*conveyor.Task, server.MaxBatchItems+1)
		for i := range big {
			big[i] = conveyor.NewTask("t", nil)
		}
		_, err = c.EnqueueBatch(ctx, big)
		isErr(t, "oversized batch", err, conveyor.ErrInvalidArgument, "items")
	})
}

func TestEnqueueTx(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	forEachProtocol(t, s, func(t *testing.T, c *conveyor.Client, p conveyor.Protocol) {
		ctx := context.Background()
		uk := "tx-" + p.String()
		fresh := ulid.Make().String()

		// Two items claiming one unique key fail the call and commit nothing.
		_, err := c.EnqueueTx(ctx, []*conveyor.Task{
			conveyor.NewTask("a", nil, conveyor.TaskID(fresh)),
			conveyor.NewTask("b", nil, conveyor.Unique(uk, 0)),
			conveyor.NewTask("c", nil, conveyor.Unique(uk, 0)),
		})
		isErr(t, "colliding items", err, conveyor.ErrAlreadyExists, "unique_key")
		_, err = c.GetTask(ctx, fresh)
		isErr(t, "GetTask after the failed tx", err, conveyor.ErrNotFound, fresh)

		// A validation error fails the whole call too.
		_, err = c.EnqueueTx(ctx, []*conveyor.Task{
			conveyor.NewTask("a", nil, conveyor.TaskID(fresh)),
			conveyor.NewTask("b", nil, conveyor.Priority(42)),
		})
		isErr(t, "invalid item", err, conveyor.ErrInvalidArgument, "items[1]")
		_, err = c.GetTask(ctx, fresh)
		isErr(t, "GetTask after the invalid tx", err, conveyor.ErrNotFound, fresh)

		// Neither failed call claimed the unique key.
		held, err := c.Enqueue(ctx, "holder", nil, conveyor.Unique(uk, 0))
		if err != nil {
			t.Fatalf("the unique key was claimed by a failed tx: %v", err)
		}

		// Success: every task, in request order; an existing id is returned as stored.
		tasks := make([]*conveyor.Task, 10)
		for i := range tasks {
			tasks[i] = conveyor.NewTask("t"+strconv.Itoa(i), []byte(strconv.Itoa(i)), conveyor.Queue("tx"))
		}
		tasks[0] = conveyor.NewTask("t0", []byte("0"), conveyor.TaskID(fresh), conveyor.Queue("tx"))
		tasks[5] = conveyor.NewTask("ignored", nil, conveyor.TaskID(held.ID))
		out, err := c.EnqueueTx(ctx, tasks)
		if err != nil {
			t.Fatalf("EnqueueTx: %v", err)
		}
		if len(out) != len(tasks) {
			t.Fatalf("%d tasks for %d items", len(out), len(tasks))
		}
		eq(t, "tasks[0].ID", out[0].ID, fresh)
		eq(t, "tasks[5].ID", out[5].ID, held.ID)
		eq(t, "tasks[5].Type", out[5].Type, "holder")
		ids := map[string]bool{}
		for i, info := range out {
			ids[info.ID] = true
			if i == 5 {
				continue
			}
			stored := getTask(t, c, info.ID)
			if stored.Type != "t"+strconv.Itoa(i) || string(stored.Payload) != strconv.Itoa(i) || stored.Queue != "tx" {
				t.Errorf("tasks[%d] is %s %q in %s, want t%d %q in tx", i, stored.Type, stored.Payload, stored.Queue, i, strconv.Itoa(i))
			}
		}
		if len(ids) != len(tasks) {
			t.Errorf("%d distinct ids for %d tasks", len(ids), len(tasks))
		}
	})
}

// TestErrors checks errors.Is for every sentinel the server can produce, in
// every wire format, and that the server's message survives.
func TestErrors(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{Token: "s3cret"})
	forEachProtocol(t, s, func(t *testing.T, c *conveyor.Client, p conveyor.Protocol) {
		ctx := context.Background()
		id := ulid.Make().String()
		if _, err := c.Enqueue(ctx, "t", nil, conveyor.TaskID(id)); err != nil {
			t.Fatal(err)
		}
		_, err := c.Enqueue(ctx, "t", nil, conveyor.TaskID(id))
		isErr(t, "repeat task id", err, conveyor.ErrAlreadyExists, id)
		for _, other := range []error{conveyor.ErrNotFound, conveyor.ErrInvalidArgument, conveyor.ErrUnauthenticated, conveyor.ErrUnavailable} {
			if errors.Is(err, other) {
				t.Errorf("already_exists matches %v", other)
			}
		}
		var ce *conveyor.Error
		if !errors.As(err, &ce) || ce.Code() != connect.CodeAlreadyExists || !strings.Contains(ce.Message(), id) {
			t.Errorf("errors.As *conveyor.Error: %#v", ce)
		}
		if connect.CodeOf(err) != connect.CodeAlreadyExists {
			t.Errorf("connect.CodeOf = %v", connect.CodeOf(err))
		}

		missing := ulid.Make().String()
		_, err = c.GetTask(ctx, missing)
		isErr(t, "unknown id", err, conveyor.ErrNotFound, missing)

		_, err = c.Enqueue(ctx, "", nil)
		isErr(t, "missing type", err, conveyor.ErrInvalidArgument, "type is required")
		_, err = c.Enqueue(ctx, "t", nil, conveyor.ProcessIn(time.Minute), conveyor.ProcessAt(time.Now()))
		isErr(t, "exclusive options", err, conveyor.ErrInvalidArgument, "mutually exclusive")
		_, err = c.GetTask(ctx, "")
		isErr(t, "empty id", err, conveyor.ErrInvalidArgument, "id is required")

		anonymous := newClient(t, s.URL(), conveyor.WithProtocol(p))
		_, err = anonymous.Enqueue(ctx, "t", nil)
		isErr(t, "no token", err, conveyor.ErrUnauthenticated, "missing bearer token")
		wrong := newClient(t, s.URL(), conveyor.WithProtocol(p), conveyor.WithToken("nope"))
		_, err = wrong.GetTask(ctx, id)
		isErr(t, "wrong token", err, conveyor.ErrUnauthenticated, "invalid bearer token")
	})
}

func TestErrUnavailable(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	c := newClient(t, s.URL())
	if _, err := c.Enqueue(context.Background(), "t", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err := c.Enqueue(context.Background(), "t", nil)
	isErr(t, "Enqueue to a stopped server", err, conveyor.ErrUnavailable, "unavailable")
}

func TestNewClientAddress(t *testing.T) {
	t.Parallel()
	for addr, ok := range map[string]bool{
		"http://127.0.0.1:7420":    true,
		"https://conveyor.example": true,
		"http://[::1]:7420/":       true,
		"127.0.0.1:7420":           false,
		"localhost:7420":           false,
		"grpc://127.0.0.1:7420":    false,
		"http://":                  false,
	} {
		_, err := conveyor.NewClient(addr)
		if (err == nil) != ok {
			t.Errorf("NewClient(%q): %v, want ok=%v", addr, err, ok)
		}
	}
}

// TestNilOptionIgnored: a nil Option (one chosen conditionally and left
// unset) is skipped by NewClient, as by NewWorker, and the options around
// it still apply.
func TestNilOptionIgnored(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{Token: "s3cret"})
	var unset conveyor.Option
	c := newClient(t, s.URL(), unset, conveyor.WithToken("s3cret"), nil)
	if _, err := c.Enqueue(context.Background(), "t", nil); err != nil {
		t.Fatalf("Enqueue with the token after a nil Option: %v", err)
	}
	if _, err := conveyor.NewWorker(s.URL(), unset, conveyor.WithToken("s3cret")); err != nil {
		t.Fatalf("NewWorker with a nil Option: %v", err)
	}
}
