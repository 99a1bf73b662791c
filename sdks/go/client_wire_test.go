// The client against the wire itself: the JSON helpers, the Connect JSON
// encoding as sent, and the SDK's types mirroring the generated ones.

package conveyor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func TestJSONHelpers(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	type email struct {
		To      string   `json:"to"`
		Subject string   `json:"subject"`
		Tags    []string `json:"tags,omitempty"`
		Count   int64
	}
	forEachProtocol(t, s, func(t *testing.T, c *conveyor.Client, p conveyor.Protocol) {
		ctx := context.Background()
		v := email{To: "ada@example.com", Subject: "héllo \"there\"", Tags: []string{"x"}, Count: 1 << 40}
		want, _ := json.Marshal(v)
		info, err := conveyor.EnqueueJSON(ctx, c, "email", v, conveyor.Queue("json"))
		if err != nil {
			t.Fatalf("EnqueueJSON: %v", err)
		}
		stored := getTask(t, c, info.ID)
		eq(t, "ContentType", stored.ContentType, "application/json")
		eq(t, "Queue", stored.Queue, "json")
		if !bytes.Equal(stored.Payload, want) {
			t.Errorf("Payload = %s, want %s", stored.Payload, want)
		}
		var back email
		if err := json.Unmarshal(stored.Payload, &back); err != nil || !reflect.DeepEqual(back, v) {
			t.Errorf("payload decodes to %+v (%v), want %+v", back, err, v)
		}

		// An option may override the content type.
		info, err = conveyor.EnqueueJSON(ctx, c, "email", v, conveyor.ContentType("application/vnd.email+json"))
		if err != nil {
			t.Fatal(err)
		}
		eq(t, "overridden ContentType", getTask(t, c, info.ID).ContentType, "application/vnd.email+json")

		task, err := conveyor.NewJSONTask("count", map[string]int{"n": 7}, conveyor.Priority(8))
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.EnqueueTx(ctx, []*conveyor.Task{task})
		if err != nil {
			t.Fatal(err)
		}
		stored = getTask(t, c, out[0].ID)
		if string(stored.Payload) != `{"n":7}` || stored.ContentType != "application/json" || stored.Priority != 8 {
			t.Errorf("NewJSONTask stored %s %q priority %d", stored.ContentType, stored.Payload, stored.Priority)
		}

		var unsupported *json.UnsupportedTypeError
		if _, err := conveyor.NewJSONTask("bad", make(chan int)); !errors.As(err, &unsupported) {
			t.Errorf("NewJSONTask(chan): %v, want a *json.UnsupportedTypeError", err)
		}
		if _, err := conveyor.EnqueueJSON(ctx, c, "bad", func() {}); !errors.As(err, &unsupported) {
			t.Errorf("EnqueueJSON(func): %v, want a *json.UnsupportedTypeError", err)
		}
	})
}

// TestConnectJSONOnTheWire posts Connect JSON by hand and reads the raw
// response text: bytes are base64, int64 is a string, Duration is "30s".
func TestConnectJSONOnTheWire(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	post := func(procedure, body string) string {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, s.URL()+procedure, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := servertest.HTTP1Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(res.Body)
		if cerr := res.Body.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode != http.StatusOK {
			t.Fatalf("POST %s: %s: %s", procedure, res.Status, raw)
		}
		return string(raw)
	}
	has := func(raw, pattern string) {
		t.Helper()
		if !regexp.MustCompile(pattern).MatchString(raw) {
			t.Errorf("response does not match %s:\n%s", pattern, raw)
		}
	}

	// "aGVsbG8=" is base64 for "hello".
	raw := post("/conveyor.v1.TaskService/Enqueue",
		`{"type":"wire","queue":"wireq","payload":"aGVsbG8=","options":{"timeout":"30s","maxRetry":3}}`)
	has(raw, `"payload":\s*"aGVsbG8="`)
	has(raw, `"timeout":\s*"30s"`)
	has(raw, `"maxRetry":\s*3[,}]`) // int32 is a JSON number
	has(raw, `"state":\s*"TASK_STATE_PENDING"`)

	// The SDK reads the same task back with Go types.
	var res conveyorv1.EnqueueResponse
	if err := protojson.Unmarshal([]byte(raw), &res); err != nil {
		t.Fatal(err)
	}
	info := getTask(t, newClient(t, s.URL(), conveyor.WithProtocol(conveyor.ProtocolConnect)), res.GetTask().GetId())
	if string(info.Payload) != "hello" || info.Options.Timeout != 30*time.Second || info.MaxRetry != 3 {
		t.Errorf("the SDK reads payload %q, timeout %s, max_retry %d", info.Payload, info.Options.Timeout, info.MaxRetry)
	}

	raw = post("/conveyor.v1.AdminService/ListQueues", `{}`)
	has(raw, `"name":\s*"wireq"`)
	has(raw, `"pending":\s*"1"`) // int64 is a JSON string
}

// TestTaskInfoMirrorsWire decodes a TaskInfo with every wire field set (from
// a stub server: a real one cannot produce a task that is at once completed,
// retried, grouped and dependent) and checks every SDK field, the copy
// Proto returns, and the conversion of a TaskInfo built by hand.
func TestTaskInfoMirrorsWire(t *testing.T) {
	t.Parallel()
	fixture := fullTaskInfo()
	requirePopulated(t, fixture.ProtoReflect(), "TaskInfo.")

	url := serveStub(t)(conveyorv1connect.NewTaskServiceHandler(&stubTaskService{info: fixture}))

	day := time.Date(2030, 5, 6, 7, 8, 9, 10, time.UTC)
	retention := 48 * time.Hour
	dep := []conveyor.Dependency{{TaskID: "01J00000000000000000000002", OnFailure: conveyor.OnFailureContinue,
		State: conveyor.TaskStateCompleted}}
	want := conveyor.TaskInfo{
		ID: "01J00000000000000000000001", Queue: "q", Type: "typ", State: conveyor.TaskStateRetry,
		Priority: 6, Retried: 2, MaxRetry: 5, LastError: "boom", Payload: []byte("pay"),
		ContentType: "text/plain", Metadata: map[string]string{"k": "v"},
		EnqueuedAt: day, NextProcessAt: day.Add(time.Minute), StartedAt: day.Add(2 * time.Minute),
		CompletedAt: day.Add(3 * time.Minute), Result: []byte("res"), ProgressPercent: 50,
		ProgressMessage: "half", Group: "grp", ConcurrencyKey: "ck",
		DependsOn: dep,
		Options: conveyor.TaskOptions{
			MaxRetry: 5, Timeout: time.Second, Deadline: day.Add(time.Hour), ProcessAt: day.Add(4 * time.Minute),
			ProcessIn: 2 * time.Second, UniqueKey: "uk", UniqueTTL: 3 * time.Second, Priority: 6,
			Retention: &retention, Group: "grp", ExpiresIn: 4 * time.Second, ExpiresAt: day.Add(2 * time.Hour),
			DependsOn:      dep,
			ConcurrencyKey: "ck", RetryStrategy: conveyor.RetryStrategyExponential,
			RetryBase: 5 * time.Second, RetryMax: 6 * time.Second, AtMostOnce: true,
		},
		ExpiresAt:  day.Add(5 * time.Minute),
		Dependents: []conveyor.TaskLink{{TaskID: "01J00000000000000000000003", State: conveyor.TaskStateBlocked}},
		Errors: []conveyor.TaskError{
			{Attempt: 1, Message: "first", At: day.Add(90 * time.Second)},
			{Attempt: 2, Message: "boom", At: day.Add(150 * time.Second)},
		},
		SessionID: "01J0000000000000000000000S",
		AttemptID: "01J0000000000000000000000A",
	}
	for _, p := range protocols {
		c := newClient(t, url, conveyor.WithProtocol(p))
		got, err := c.GetTask(context.Background(), "any")
		if err != nil {
			t.Fatalf("%s: GetTask: %v", p, err)
		}
		gv, wv := reflect.ValueOf(got).Elem(), reflect.ValueOf(&want).Elem()
		for i := range gv.NumField() {
			f := gv.Type().Field(i)
			if f.IsExported() && !reflect.DeepEqual(gv.Field(i).Interface(), wv.Field(i).Interface()) {
				t.Errorf("%s: %s = %#v, want %#v", p, f.Name, gv.Field(i).Interface(), wv.Field(i).Interface())
			}
		}
		wire := got.Proto()
		if !proto.Equal(wire, fixture) {
			t.Errorf("%s: Proto() = %v, want %v", p, wire, fixture)
		}
		wire.Id = "changed"
		if got.Proto().GetId() != want.ID {
			t.Errorf("%s: Proto() shares its message", p)
		}

		// A TaskInfo built by hand (no wire message kept) converts from its fields.
		var hand conveyor.TaskInfo
		hv := reflect.ValueOf(&hand).Elem()
		for i := range gv.NumField() {
			if gv.Type().Field(i).IsExported() {
				hv.Field(i).Set(gv.Field(i))
			}
		}
		if !proto.Equal(hand.Proto(), fixture) {
			t.Errorf("%s: hand-built Proto() = %v, want %v", p, hand.Proto(), fixture)
		}
	}
	if (&conveyor.TaskInfo{}).Proto().GetOptions() != nil {
		t.Error("a zero TaskInfo converts with options")
	}
}

type stubTaskService struct {
	conveyorv1connect.UnimplementedTaskServiceHandler
	info *conveyorv1.TaskInfo
}

func (s *stubTaskService) GetTask(context.Context, *connect.Request[conveyorv1.GetTaskRequest]) (*connect.Response[conveyorv1.TaskInfo], error) {
	return connect.NewResponse(s.info), nil
}

func fullTaskInfo() *conveyorv1.TaskInfo {
	day := time.Date(2030, 5, 6, 7, 8, 9, 10, time.UTC)
	ts := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(day.Add(d)) }
	dep := func() []*conveyorv1.TaskDependency {
		return []*conveyorv1.TaskDependency{{TaskId: "01J00000000000000000000002", OnFailure: conveyorv1.OnFailure_ON_FAILURE_CONTINUE,
			State: conveyorv1.TaskState_TASK_STATE_COMPLETED}}
	}
	return &conveyorv1.TaskInfo{
		Id: "01J00000000000000000000001", Queue: "q", Type: "typ", State: conveyorv1.TaskState_TASK_STATE_RETRY,
		Priority: 6, Retried: 2, MaxRetry: 5, LastError: "boom", Payload: []byte("pay"),
		ContentType: "text/plain", Metadata: map[string]string{"k": "v"},
		EnqueuedAt: ts(0), NextProcessAt: ts(time.Minute), StartedAt: ts(2 * time.Minute),
		CompletedAt: ts(3 * time.Minute), Result: []byte("res"), ProgressPercent: 50,
		ProgressMessage: "half", Group: "grp", ConcurrencyKey: "ck", DependsOn: dep(),
		Options: &conveyorv1.TaskOptions{
			MaxRetry: 5, Timeout: durationpb.New(time.Second), Deadline: ts(time.Hour), ProcessAt: ts(4 * time.Minute),
			ProcessIn: durationpb.New(2 * time.Second), UniqueKey: "uk", UniqueTtl: durationpb.New(3 * time.Second),
			Priority: 6, Retention: durationpb.New(48 * time.Hour), Group: "grp",
			ExpiresIn: durationpb.New(4 * time.Second), ExpiresAt: ts(2 * time.Hour), DependsOn: dep(),
			ConcurrencyKey: "ck", AtMostOnce: true,
			RetryPolicy: &conveyorv1.RetryPolicy{
				Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_EXPONENTIAL,
				Base:     durationpb.New(5 * time.Second), Max: durationpb.New(6 * time.Second),
			},
		},
		ExpiresAt:  ts(5 * time.Minute),
		Dependents: []*conveyorv1.TaskLink{{TaskId: "01J00000000000000000000003", State: conveyorv1.TaskState_TASK_STATE_BLOCKED}},
		Errors: []*conveyorv1.TaskError{
			{Attempt: 1, Message: "first", At: ts(90 * time.Second)},
			{Attempt: 2, Message: "boom", At: ts(150 * time.Second)},
		},
		SessionId: "01J0000000000000000000000S",
		AttemptId: "01J0000000000000000000000A",
	}
}

// requirePopulated fails for every field of m (and of its conveyor.v1
// sub-messages) left unset, so that a field added to the proto must be
// added to the fixture, and so to the SDK.
func requirePopulated(t *testing.T, m protoreflect.Message, path string) {
	t.Helper()
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		name := path + string(fd.Name())
		if !m.Has(fd) {
			t.Errorf("the fixture leaves %s unset", name)
			continue
		}
		if fd.Message() == nil || fd.IsMap() || fd.Message().ParentFile().Package() != "conveyor.v1" {
			continue
		}
		if fd.IsList() {
			l := m.Get(fd).List()
			for j := range l.Len() {
				requirePopulated(t, l.Get(j).Message(), name+"[].")
			}
			continue
		}
		requirePopulated(t, m.Get(fd).Message(), name+".")
	}
}

// TestEnumsMatchTheWire checks that each SDK enum names every wire value,
// with the same number.
func TestEnumsMatchTheWire(t *testing.T) {
	t.Parallel()
	check := func(wire map[int32]string, prefix string, name func(int32) string) {
		t.Helper()
		for n, w := range wire {
			if got, want := name(n), strings.ToLower(strings.TrimPrefix(w, prefix)); got != want {
				t.Errorf("%s: String() = %q, want %q", w, got, want)
			}
		}
	}
	check(conveyorv1.TaskState_name, "TASK_STATE_", func(n int32) string { return conveyor.TaskState(n).String() })
	check(conveyorv1.OnFailure_name, "ON_FAILURE_", func(n int32) string { return conveyor.OnFailure(n).String() })
	check(conveyorv1.RetryStrategy_name, "RETRY_STRATEGY_", func(n int32) string { return conveyor.RetryStrategy(n).String() })
	eq(t, "unknown state", conveyor.TaskState(42).String(), "TaskState(42)")
	eq(t, "unknown on-failure", conveyor.OnFailure(-1).String(), "OnFailure(-1)")
	eq(t, "unknown strategy", conveyor.RetryStrategy(9).String(), "RetryStrategy(9)")
	eq(t, "TaskStateBlocked", int32(conveyor.TaskStateBlocked), int32(conveyorv1.TaskState_TASK_STATE_BLOCKED))
}
