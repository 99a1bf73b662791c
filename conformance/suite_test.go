package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/internal/testwait"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	CleanupBuilds()
	os.Exit(code)
}

// A check runs against one SDK's worker command.
type check struct {
	name string
	run  func(t *testing.T, cmd []string)
}

var checks = []check{
	{"handshake", checkHandshake},
	{"waits-for-welcome", checkWaitsForWelcome},
	{"tls", checkTLS},
	{"heartbeat", checkHeartbeat},
	{"heartbeat-server", checkHeartbeatServer},
	{"concurrency", checkConcurrency},
	{"outcomes-frames", checkOutcomeFrames},
	{"outcomes-server", checkOutcomesServer},
	{"deadline", checkDeadline},
	{"cancel", checkCancel},
	{"ping-storm", checkPingStorm},
	{"batch-frames", checkBatchFrames},
	{"batch-server", checkBatchServer},
	{"drain-frames", checkDrainFrames},
	{"drain-server", checkDrainServer},
	{"reconnect-backoff", checkReconnectBackoff},
	{"stream-cut", checkStreamCut},
	{"fatal-refusals", checkFatalRefusals},
	{"fatal-token", checkFatalToken},
	{"hello-routing", checkHelloRouting},
	{"start-authorization", checkStartAuthorization},
	{"at-most-once-server", checkAtMostOnceServer},
	{"release-drain-server", checkReleaseDrain},
}

// TestConformance runs every check against every SDK's worker.
func TestConformance(t *testing.T) {
	for _, sdk := range SDKs("..") {
		t.Run(sdk.Name, func(t *testing.T) {
			cmd, err := sdk.Command()
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range checks {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					c.run(t, cmd)
				})
			}
		})
	}
}

// Timing bounds: generous, for a slow and shared machine.
const (
	short = 20 * time.Second // anything that should happen promptly
	slack = time.Second      // added to an upper bound the protocol sets
)

func workerEnv(url string, kv ...string) map[string]string {
	env := map[string]string{"CONVEYOR_URL": url}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

// startOnFake starts the worker against f and returns its first session.
func startOnFake(t *testing.T, cmd []string, f *Fake, kv ...string) (*Proc, *FakeSession) {
	t.Helper()
	p := Start(t, cmd, workerEnv(f.URL, kv...))
	id := p.WaitReady(short)
	s := lastSession(f)
	if s == nil || s.ID != id {
		t.Fatalf("ready line names session %q, not the fake's Welcome", id)
	}
	return p, s
}

func lastSession(f *Fake) *FakeSession {
	ss := f.Sessions()
	if len(ss) == 0 {
		return nil
	}
	return ss[len(ss)-1]
}

// waitResult waits for attempt's Result and returns it.
func waitResult(t *testing.T, s *FakeSession, attempt string, timeout time.Duration) *conveyorv1.Result {
	t.Helper()
	testwait.Until(t, timeout, "a Result for attempt "+attempt, func() bool { return len(s.Results(attempt)) > 0 })
	return s.Results(attempt)[0]
}

// requireOneResult checks each attempt got exactly one Result.
func requireOneResult(t *testing.T, s *FakeSession, attempts ...string) {
	t.Helper()
	for _, a := range attempts {
		if n := len(s.Results(a)); n != 1 {
			t.Errorf("attempt %s got %d Results, want exactly 1", a, n)
		}
	}
}

func heartbeatLists(f Frame, id, attempt string) bool {
	hb := f.Msg.GetHeartbeat()
	return slices.Contains(hb.GetActiveTaskIds(), id) && slices.Contains(hb.GetActiveAttemptIds(), attempt)
}

// waitHeartbeatListing waits for a heartbeat listing the task, which shows
// the worker holds it.
func waitHeartbeatListing(t *testing.T, s *FakeSession, id, attempt string) {
	t.Helper()
	testwait.Until(t, short, "a heartbeat listing "+id, func() bool {
		return slices.ContainsFunc(s.Heartbeats(), func(f Frame) bool { return heartbeatLists(f, id, attempt) })
	})
}

// checkHandshake: Hello first with the configured queues, weights,
// concurrency and batch types and an sdk_version; ready names the
// Welcome's session.
func checkHandshake(t *testing.T, cmd []string) {
	f := StartFake(t, time.Minute, 20*time.Second, nil)
	_, s := startOnFake(t, cmd, f, "CONVEYOR_QUEUES", "alpha=3,beta.b-1=1", "CONVEYOR_CONCURRENCY", "5",
		"CONVEYOR_BATCH_TYPES", "conformance.batch")
	h := s.Hello
	if q := h.GetQueues(); len(q) != 2 || q["alpha"] != 3 || q["beta.b-1"] != 1 {
		t.Errorf("Hello.queues = %v, want alpha=3 beta.b-1=1", q)
	}
	if h.GetConcurrency() != 5 {
		t.Errorf("Hello.concurrency = %d, want 5", h.GetConcurrency())
	}
	if h.GetSdkVersion() == "" {
		t.Error("Hello.sdk_version is empty")
	}
	if !slices.Contains(h.GetBatchTypes(), "conformance.batch") {
		t.Errorf("Hello.batch_types = %v, want conformance.batch", h.GetBatchTypes())
	}

	f2 := StartFake(t, time.Minute, 20*time.Second, nil)
	_, s2 := startOnFake(t, cmd, f2)
	if q := s2.Hello.GetQueues(); len(q) != 1 || q["default"] != 1 || s2.Hello.GetConcurrency() != 4 {
		t.Errorf("default Hello: queues %v concurrency %d, want default=1 and 4", q, s2.Hello.GetConcurrency())
	}
}

// checkWaitsForWelcome: with the Welcome held back, the worker sends no
// frame and prints no ready line before it.
func checkWaitsForWelcome(t *testing.T, cmd []string) {
	f := StartFake(t, time.Minute, 100*time.Millisecond, nil, WelcomeDelay(time.Second))
	p := Start(t, cmd, workerEnv(f.URL))
	p.WaitReady(short)
	readyAt := time.Now()
	s := lastSession(f)
	if s == nil {
		t.Fatal("the worker printed ready before any Welcome")
	}
	welcomed := s.Welcomed()
	if welcomed.IsZero() || readyAt.Before(welcomed) {
		t.Fatalf("ready at %s, before the Welcome (%s)", readyAt, welcomed)
	}
	for _, fr := range s.Frames() {
		if fr.At.Before(welcomed) {
			t.Errorf("the worker sent %T before the Welcome", fr.Msg.GetFrame())
		}
	}
}

// checkTLS: over https, trusting CONVEYOR_TLS_CA.
func checkTLS(t *testing.T, cmd []string) {
	certFile, keyFile, _ := servertest.SelfSignedCert(t, t.TempDir())
	srv := servertest.Start(t, server.Config{TLSCertFile: certFile, TLSKeyFile: keyFile})
	if !strings.HasPrefix(srv.URL(), "https://") {
		t.Fatalf("server URL %s is not https", srv.URL())
	}
	Start(t, cmd, workerEnv(srv.URL(), "CONVEYOR_TLS_CA", certFile)).WaitReady(short)
}

// checkHeartbeat: heartbeats come every heartbeat_interval (150ms here,
// not a hard-coded value) and each lists every in-flight task id and
// attempt id.
func checkHeartbeat(t *testing.T, cmd []string) {
	const interval = 150 * time.Millisecond
	f := StartFake(t, 3*time.Second, interval, nil)
	_, s := startOnFake(t, cmd, f)
	s.Dispatch("hb1", "hb1-a", "conformance.sleep", `{"ms":2500}`, time.Time{})
	s.Dispatch("hb2", "hb2-a", "conformance.sleep", `{"ms":2500}`, time.Time{})
	r1 := waitResult(t, s, "hb1-a", short)
	waitResult(t, s, "hb2-a", short)
	if r1.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Fatalf("sleep outcome %v, want SUCCESS", r1.GetOutcome())
	}
	var during []Frame // heartbeats from the first listing both to the first Result
	var resultAt time.Time
	for _, f := range s.Frames() {
		if f.Msg.GetResult() != nil && resultAt.IsZero() {
			resultAt = f.At
		}
	}
	for _, f := range s.Heartbeats() {
		if f.At.After(resultAt) {
			break
		}
		if len(during) > 0 || (heartbeatLists(f, "hb1", "hb1-a") && heartbeatLists(f, "hb2", "hb2-a")) {
			during = append(during, f)
		}
	}
	if len(during) < 5 {
		t.Fatalf("%d heartbeats listed the tasks while they ran 2.5s with a %s interval, want at least 5", len(during), interval)
	}
	for i, f := range during {
		if !heartbeatLists(f, "hb1", "hb1-a") || !heartbeatLists(f, "hb2", "hb2-a") {
			t.Errorf("heartbeat %d omits an in-flight task or attempt: %v", i, f.Msg.GetHeartbeat())
		}
		if i > 0 {
			if gap := f.At.Sub(during[i-1].At); gap > 4*interval+slack {
				t.Errorf("heartbeat gap %s, want about %s", gap, interval)
			}
		}
	}
}

// checkHeartbeatServer: on a real server with a 1s lease, a 4s task
// completes on its first attempt: the heartbeats, at the Welcome's
// interval, kept its lease.
func checkHeartbeatServer(t *testing.T, cmd []string) {
	e := startReal(t, server.Config{LeaseTTL: time.Second})
	Start(t, cmd, workerEnv(e.srv.URL())).WaitReady(short)
	id := e.enqueue("conformance.sleep", `{"ms":4000}`, nil)
	ti := e.waitFor(id, "completed", inState(conveyorv1.TaskState_TASK_STATE_COMPLETED))
	if ti.GetRetried() != 0 {
		t.Errorf("a 4s task under a 1s lease was retried %d times: its lease lapsed", ti.GetRetried())
	}
}

// checkConcurrency: the worker runs its concurrency of tasks at once.
func checkConcurrency(t *testing.T, cmd []string) {
	f := StartFake(t, time.Minute, time.Second, nil)
	_, s := startOnFake(t, cmd, f, "CONVEYOR_CONCURRENCY", "3")
	start := time.Now()
	for i := range 3 {
		s.Dispatch(fmt.Sprint("c", i), fmt.Sprint("c", i, "-a"), "conformance.sleep", `{"ms":2500}`, time.Time{})
	}
	for i := range 3 {
		waitResult(t, s, fmt.Sprint("c", i, "-a"), short)
	}
	// Serially the three would take 7.5s.
	if d := time.Since(start); d > 6*time.Second {
		t.Fatalf("three 2.5s tasks at concurrency 3 took %s: they did not run at once", d)
	}
	requireOneResult(t, s, "c0-a", "c1-a", "c2-a")
}

// bigPayload has unicode, escapes and integers past 2^53, which a JSON
// round trip through floats or re-encoding would change.
const bigPayload = `{"s":"h\u00e9llo \"w\" \\ \n 🚀 ü","n":9007199254740993,"m":-18446744073709551615,"f":1.0e+2,"z":[ ]}`

// checkOutcomeFrames: exactly one Result per Dispatch, attempt_id echoed,
// and the outcome mapping.
func checkOutcomeFrames(t *testing.T, cmd []string) {
	f := StartFake(t, time.Minute, time.Second, nil)
	_, s := startOnFake(t, cmd, f)
	s.Dispatch("echo", "echo-a", "conformance.echo", bigPayload, time.Time{})
	s.Dispatch("fail", "fail-a", "conformance.fail", `{"message":"boom ü"}`, time.Time{})
	s.Dispatch("skip", "skip-a", "conformance.skip", `{"message":"no way"}`, time.Time{})
	s.Dispatch("panic", "panic-a", "conformance.panic", `{}`, time.Time{})
	s.Dispatch("prog", "prog-a", "conformance.progress", `{}`, time.Time{})
	want := map[string]conveyorv1.TaskOutcome{
		"echo-a": conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS, "fail-a": conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY,
		"skip-a": conveyorv1.TaskOutcome_TASK_OUTCOME_SKIP_RETRY, "panic-a": conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY,
		"prog-a": conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS,
	}
	for a, o := range want {
		r := waitResult(t, s, a, short)
		if r.GetOutcome() != o || r.GetTaskId()+"-a" != a {
			t.Errorf("attempt %s: Result %v for task %q, want %v", a, r.GetOutcome(), r.GetTaskId(), o)
		}
	}
	if r := s.Results("echo-a")[0]; string(r.GetResult()) != bigPayload {
		t.Errorf("echo result %q, want the payload's bytes %q", r.GetResult(), bigPayload)
	}
	if m := s.Results("fail-a")[0].GetErrorMsg(); !strings.Contains(m, "boom ü") {
		t.Errorf("fail error_msg %q, want the payload's message", m)
	}
	if m := s.Results("skip-a")[0].GetErrorMsg(); !strings.Contains(m, "no way") {
		t.Errorf("skip error_msg %q, want the payload's message", m)
	}
	if m := s.Results("panic-a")[0].GetErrorMsg(); m == "" {
		t.Error("panic Result has no error_msg")
	}
	var progressed bool
	for _, fr := range s.Frames() {
		if p := fr.Msg.GetProgress(); p != nil && p.GetTaskId() == "prog" && p.GetPercent() == 50 && p.GetMessage() == "half" {
			progressed = true
		}
	}
	if !progressed {
		t.Error("no Progress{prog, 50, half} before the Result")
	}
	// A last round trip, so that a duplicate Result would have arrived.
	s.Dispatch("last", "last-a", "conformance.echo", `1`, time.Time{})
	waitResult(t, s, "last-a", short)
	requireOneResult(t, s, "echo-a", "fail-a", "skip-a", "panic-a", "prog-a", "last-a")
}

// realServer starts a server and returns it with its clients.
type realEnv struct {
	t     *testing.T
	srv   *servertest.Server
	tasks conveyorv1connect.TaskServiceClient
	admin conveyorv1connect.AdminServiceClient
}

func startReal(t *testing.T, cfg server.Config) *realEnv {
	t.Helper()
	srv := servertest.Start(t, cfg)
	opts := []connect.ClientOption{connect.WithGRPC(), servertest.BearerToken(cfg.Token)}
	return &realEnv{t: t, srv: srv,
		tasks: conveyorv1connect.NewTaskServiceClient(servertest.HTTPClient(), srv.URL(), opts...),
		admin: conveyorv1connect.NewAdminServiceClient(servertest.HTTPClient(), srv.URL(), opts...)}
}

func (e *realEnv) enqueue(typ, payload string, opts *conveyorv1.TaskOptions) string {
	e.t.Helper()
	res, err := e.tasks.Enqueue(context.Background(), connect.NewRequest(&conveyorv1.EnqueueRequest{
		Type: typ, Payload: []byte(payload), Options: opts}))
	if err != nil {
		e.t.Fatalf("enqueue %s: %v", typ, err)
	}
	return res.Msg.GetTask().GetId()
}

func (e *realEnv) get(id string) *conveyorv1.TaskInfo {
	e.t.Helper()
	res, err := e.tasks.GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
	if err != nil {
		e.t.Fatalf("get %s: %v", id, err)
	}
	return res.Msg
}

func (e *realEnv) waitFor(id, what string, cond func(*conveyorv1.TaskInfo) bool) *conveyorv1.TaskInfo {
	e.t.Helper()
	var ti *conveyorv1.TaskInfo
	testwait.Until(e.t, short, "task "+id+": "+what, func() bool { ti = e.get(id); return cond(ti) })
	return ti
}

func inState(s conveyorv1.TaskState) func(*conveyorv1.TaskInfo) bool {
	return func(ti *conveyorv1.TaskInfo) bool { return ti.GetState() == s }
}

// checkOutcomesServer: end to end, over both protocols, the outcomes as a
// real server records them.
func checkOutcomesServer(t *testing.T, cmd []string) {
	for _, proto := range []string{"grpc", "connect"} {
		t.Run(proto, func(t *testing.T) {
			e := startReal(t, server.Config{})
			p := Start(t, cmd, workerEnv(e.srv.URL(), "CONVEYOR_PROTOCOL", proto))
			p.WaitReady(short)
			once := &conveyorv1.TaskOptions{MaxRetry: 1}
			echo := e.enqueue("conformance.echo", bigPayload, nil)
			fail := e.enqueue("conformance.fail", `{"message":"boom ü"}`, once)
			skip := e.enqueue("conformance.skip", `{"message":"no way"}`, once)
			panics := e.enqueue("conformance.panic", `{}`, once)
			prog := e.enqueue("conformance.progress", `{}`, nil)

			ti := e.waitFor(echo, "completed", inState(conveyorv1.TaskState_TASK_STATE_COMPLETED))
			if string(ti.GetResult()) != bigPayload {
				t.Errorf("echo result %q, want %q", ti.GetResult(), bigPayload)
			}
			ti = e.waitFor(fail, "retried", func(ti *conveyorv1.TaskInfo) bool { return ti.GetRetried() >= 1 })
			if !strings.Contains(ti.GetLastError(), "boom ü") {
				t.Errorf("fail last_error %q, want the message", ti.GetLastError())
			}
			ti = e.waitFor(skip, "archived", inState(conveyorv1.TaskState_TASK_STATE_ARCHIVED))
			if ti.GetRetried() != 0 || !strings.Contains(ti.GetLastError(), "no way") {
				t.Errorf("skip: retried %d last_error %q, want 0 and the message", ti.GetRetried(), ti.GetLastError())
			}
			e.waitFor(panics, "retried", func(ti *conveyorv1.TaskInfo) bool { return ti.GetRetried() >= 1 })
			ti = e.waitFor(prog, "completed", inState(conveyorv1.TaskState_TASK_STATE_COMPLETED))
			// The server may record 100 on completion; the message stays.
			if ti.GetProgressMessage() != "half" {
				t.Errorf("progress %d %q, want the message half", ti.GetProgressPercent(), ti.GetProgressMessage())
			}
		})
	}
}

// checkDeadline: Dispatch.deadline, and a task's timeout on a real server,
// abort a sleep with a RETRY.
func checkDeadline(t *testing.T, cmd []string) {
	f := StartFake(t, time.Minute, time.Second, nil)
	_, s := startOnFake(t, cmd, f)
	// As a real server does: Dispatch.deadline is the task's timeout from
	// now, which its options carry too.
	env := Envelope("dl", "dl-a", "conformance.sleep", `{"ms":600000}`)
	env.Options = &conveyorv1.TaskOptions{Timeout: durationpb.New(time.Second)}
	s.Send(&conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Dispatch{Dispatch: &conveyorv1.Dispatch{
		Task: env, AttemptId: "dl-a", Deadline: timestamp(time.Now().Add(time.Second))}}})
	if r := waitResult(t, s, "dl-a", short); r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY {
		t.Errorf("past its deadline the sleep reported %v, want RETRY", r.GetOutcome())
	}

	e := startReal(t, server.Config{})
	Start(t, cmd, workerEnv(e.srv.URL())).WaitReady(short)
	id := e.enqueue("conformance.sleep", `{"ms":600000}`, &conveyorv1.TaskOptions{MaxRetry: 1, Timeout: durationpb.New(time.Second)})
	ti := e.waitFor(id, "retried after its timeout", func(ti *conveyorv1.TaskInfo) bool { return ti.GetRetried() >= 1 })
	if ti.GetLastError() == "" {
		t.Error("a timed-out attempt left no last_error")
	}
}

// checkCancel: a Cancel stops a running sleep, which still reports one
// Result, a RETRY.
func checkCancel(t *testing.T, cmd []string) {
	f := StartFake(t, time.Minute, 200*time.Millisecond, nil)
	_, s := startOnFake(t, cmd, f)
	s.Dispatch("cx", "cx-a", "conformance.sleep", `{"ms":600000}`, time.Time{})
	waitHeartbeatListing(t, s, "cx", "cx-a")
	s.Send(&conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Cancel{Cancel: &conveyorv1.Cancel{TaskId: "cx"}}})
	if r := waitResult(t, s, "cx-a", short); r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_RETRY {
		t.Errorf("a canceled sleep reported %v, want RETRY", r.GetOutcome())
	}
	s.Dispatch("cx2", "cx2-a", "conformance.echo", `2`, time.Time{})
	waitResult(t, s, "cx2-a", short)
	requireOneResult(t, s, "cx-a")
}

// checkPingStorm: thousands of Pings change nothing: no reply, no broken
// session, dispatches still served.
func checkPingStorm(t *testing.T, cmd []string) {
	f := StartFake(t, time.Minute, time.Second, nil)
	p, s := startOnFake(t, cmd, f)
	for range 3000 {
		s.Send(&conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Ping{Ping: &conveyorv1.Ping{}}})
	}
	s.Dispatch("ps", "ps-a", "conformance.echo", `"after the storm"`, time.Time{})
	if r := waitResult(t, s, "ps-a", short); string(r.GetResult()) != `"after the storm"` {
		t.Errorf("echo after a Ping storm: %q", r.GetResult())
	}
	for _, fr := range s.Frames() {
		if fr.Msg.GetHeartbeat() == nil && fr.Msg.GetResult() == nil {
			t.Errorf("the worker sent %T during a Ping storm", fr.Msg.GetFrame())
		}
	}
	if p.Exited() || len(f.Sessions()) != 1 {
		t.Errorf("the Ping storm ended the session or the worker")
	}
}

// checkBatchFrames: a BatchDispatch gets one BatchResult, one SUCCESS per
// member with its own payload and attempt id; heartbeats list the members.
func checkBatchFrames(t *testing.T, cmd []string) {
	f := StartFake(t, time.Minute, 200*time.Millisecond, nil)
	_, s := startOnFake(t, cmd, f, "CONVEYOR_BATCH_TYPES", "conformance.batch")
	var envs []*conveyorv1.TaskEnvelope
	for i := range 3 {
		envs = append(envs, Envelope(fmt.Sprint("b", i), fmt.Sprint("b", i, "-a"), "conformance.batch", fmt.Sprintf(`{"i":%d}`, i)))
	}
	s.Send(&conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_BatchDispatch{BatchDispatch: &conveyorv1.BatchDispatch{
		Tasks: envs, Group: "g", Deadline: timestamp(time.Now().Add(time.Minute))}}})
	var br []*conveyorv1.BatchResult
	testwait.Until(t, short, "a BatchResult", func() bool {
		br = br[:0]
		for _, fr := range s.Frames() {
			if b := fr.Msg.GetBatchResult(); b != nil {
				br = append(br, b)
			}
		}
		return len(br) > 0
	})
	if len(br) != 1 || len(br[0].GetResults()) != 3 {
		t.Fatalf("got %d BatchResults (%v), want one of 3 members", len(br), br)
	}
	for _, r := range br[0].GetResults() {
		var i int
		if _, err := fmt.Sscanf(r.GetTaskId(), "b%d", &i); err != nil {
			t.Fatalf("member result for %q", r.GetTaskId())
		}
		if r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS || r.GetAttemptId() != r.GetTaskId()+"-a" ||
			string(r.GetResult()) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Errorf("member %s: %v attempt %q result %q", r.GetTaskId(), r.GetOutcome(), r.GetAttemptId(), r.GetResult())
		}
	}
}

// checkBatchServer: a group that fires by size on a real server is worked
// as a batch, each member completed with its own payload.
func checkBatchServer(t *testing.T, cmd []string) {
	e := startReal(t, server.Config{GroupPolicy: broker.GroupPolicy{MaxSize: 3, MaxDelay: time.Hour, GracePeriod: time.Hour}})
	Start(t, cmd, workerEnv(e.srv.URL(), "CONVEYOR_BATCH_TYPES", "conformance.batch")).WaitReady(short)
	var ids []string
	for i := range 3 {
		ids = append(ids, e.enqueue("conformance.batch", fmt.Sprintf(`{"i":%d}`, i), &conveyorv1.TaskOptions{Group: "g"}))
	}
	for i, id := range ids {
		ti := e.waitFor(id, "completed", inState(conveyorv1.TaskState_TASK_STATE_COMPLETED))
		if string(ti.GetResult()) != fmt.Sprintf(`{"i":%d}`, i) {
			t.Errorf("member %d result %q", i, ti.GetResult())
		}
	}
}

// checkDrainFrames: on SIGTERM a short task finishes, a long one is
// RELEASED after CONVEYOR_DRAIN_MS, a late dispatch is listed in
// heartbeats but not run, the request side closes and the exit is 0.
func checkDrainFrames(t *testing.T, cmd []string) {
	f := StartFake(t, time.Minute, 150*time.Millisecond, nil)
	p, s := startOnFake(t, cmd, f, "CONVEYOR_DRAIN_MS", "4000")
	s.Dispatch("long", "long-a", "conformance.sleep", `{"ms":600000}`, time.Time{})
	s.Dispatch("short", "short-a", "conformance.sleep", `{"ms":1500}`, time.Time{})
	waitHeartbeatListing(t, s, "short", "short-a")
	p.Signal(syscall.SIGTERM)
	if r := waitResult(t, s, "short-a", short); r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Errorf("a task shorter than the drain reported %v, want SUCCESS", r.GetOutcome())
	}
	lateAt := time.Now()
	s.Dispatch("late", "late-a", "conformance.echo", `"late"`, time.Time{})
	if r := waitResult(t, s, "long-a", short); r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED {
		t.Errorf("a task the drain abandoned reported %v, want RELEASED", r.GetOutcome())
	}
	select {
	case <-s.RequestClosed():
	case <-time.After(short):
		t.Fatal("the worker did not close the stream after the drain")
	}
	if code := p.WaitExit(short); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
	for _, r := range s.Results("late-a") {
		if r.GetOutcome() == conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
			t.Error("a dispatch that arrived during the drain was run")
		}
	}
	if len(s.Results("late-a")) == 0 && !slices.ContainsFunc(s.Heartbeats(), func(f Frame) bool {
		return f.At.After(lateAt) && heartbeatLists(f, "late", "late-a")
	}) {
		t.Error("a late dispatch was neither listed in a heartbeat nor answered")
	}
	requireOneResult(t, s, "short-a", "long-a")
}

// checkDrainServer: a drain gives an abandoned task back with its retry
// count unchanged.
func checkDrainServer(t *testing.T, cmd []string) {
	e := startReal(t, server.Config{})
	p := Start(t, cmd, workerEnv(e.srv.URL(), "CONVEYOR_DRAIN_MS", "300"))
	p.WaitReady(short)
	id := e.enqueue("conformance.sleep", `{"ms":600000}`, nil)
	e.waitFor(id, "active", inState(conveyorv1.TaskState_TASK_STATE_ACTIVE))
	p.Signal(syscall.SIGTERM)
	if code := p.WaitExit(short); code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
	ti := e.waitFor(id, "pending again", inState(conveyorv1.TaskState_TASK_STATE_PENDING))
	if ti.GetRetried() != 0 {
		t.Errorf("retried %d after a drain, want 0", ti.GetRetried())
	}
}

// checkReconnectBackoff: refused with unavailable, the worker retries
// within full-jitter bounds (base 500ms, doubling); after a Welcome the
// counter resets, and a clean end or an unavailable cut reconnects.
func checkReconnectBackoff(t *testing.T, cmd []string) {
	const refusals = 5
	f := StartFake(t, time.Minute, time.Second, func(n int) error {
		if n < refusals {
			return connect.NewError(connect.CodeUnavailable, errors.New("not now"))
		}
		return nil
	})
	p := Start(t, cmd, workerEnv(f.URL))
	first := p.WaitReady(time.Minute)
	at := f.Attempts()
	for i := 1; i < len(at); i++ {
		bound := min(30*time.Second, 500*time.Millisecond<<(i-1)) + slack
		if gap := at[i].Sub(at[i-1]); gap > bound {
			t.Errorf("delay before attempt %d was %s, above the full-jitter bound %s", i, gap, bound)
		}
	}
	// After a Welcome the next delay is attempt 0's again: [0, 500ms).
	cutAt := time.Now()
	lastSession(f).Cut(connect.NewError(connect.CodeUnavailable, errors.New("going away")))
	second := p.WaitReady(short)
	if second == first {
		t.Fatal("no new session after the cut")
	}
	if gap := f.Attempts()[refusals+1].Sub(cutAt); gap > 500*time.Millisecond+slack {
		t.Errorf("reconnect after an established session took %s: the backoff counter was not reset", gap)
	}
	lastSession(f).Cut(nil) // a clean end is transient too
	p.WaitReady(short)
}

// checkStreamCut: a stream cut while a task runs; the worker reconnects
// and the redelivered attempt gets exactly one Result.
func checkStreamCut(t *testing.T, cmd []string) {
	f := StartFake(t, time.Minute, 150*time.Millisecond, nil)
	p, s := startOnFake(t, cmd, f)
	s.Dispatch("cut", "cut-a1", "conformance.sleep", `{"ms":1000}`, time.Time{})
	waitHeartbeatListing(t, s, "cut", "cut-a1")
	s.Cut(connect.NewError(connect.CodeUnavailable, errors.New("cut")))
	p.WaitReady(short)
	s2 := lastSession(f)
	s2.Dispatch("cut", "cut-a2", "conformance.sleep", `{"ms":10}`, time.Time{})
	if r := waitResult(t, s2, "cut-a2", short); r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Errorf("the redelivery reported %v", r.GetOutcome())
	}
	s2.Dispatch("cut2", "cut2-a", "conformance.sleep", `{"ms":1500}`, time.Time{})
	waitResult(t, s2, "cut2-a", short) // by now the first attempt's sleep is long over
	requireOneResult(t, s2, "cut-a2", "cut2-a")
	if n := len(s2.Results("cut-a1")); n > 1 {
		t.Errorf("the cut attempt got %d Results on the new session", n)
	}
}

// checkFatalRefusals: unauthenticated and invalid_argument end the worker
// with status 3 and no reconnect; the error is on stderr.
func checkFatalRefusals(t *testing.T, cmd []string) {
	for _, code := range []connect.Code{connect.CodeUnauthenticated, connect.CodeInvalidArgument, connect.CodePermissionDenied} {
		t.Run(code.String(), func(t *testing.T) {
			f := StartFake(t, time.Minute, time.Second, func(int) error {
				return connect.NewError(code, errors.New("refused on purpose"))
			})
			p := Start(t, cmd, workerEnv(f.URL))
			if got := p.WaitExit(short); got != 3 {
				t.Errorf("exit status %d on %s, want 3", got, code)
			}
			if n := len(f.Attempts()); n != 1 {
				t.Errorf("%d session attempts on %s, want 1 (no reconnect)", n, code)
			}
			if !strings.Contains(p.Stderr(), "refused on purpose") {
				t.Errorf("stderr does not carry the error: %q", p.Stderr())
			}
		})
	}
}

// checkFatalToken: a real server refuses a wrong token; exit 3.
func checkFatalToken(t *testing.T, cmd []string) {
	e := startReal(t, server.Config{Token: "right-token"})
	p := Start(t, cmd, workerEnv(e.srv.URL(), "CONVEYOR_TOKEN", "wrong-token"))
	if got := p.WaitExit(short); got != 3 {
		t.Errorf("exit status %d with a wrong token, want 3", got)
	}
	ok := Start(t, cmd, workerEnv(e.srv.URL(), "CONVEYOR_TOKEN", "right-token"))
	ok.WaitReady(short)
}
