package conformance

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/internal/testwait"
	"github.com/conveyor-dev/conveyor/server"
)

// The checks of routing by type and release and of start authorization
// (CONTRACT.md, "Routing by type and release", "Start authorization").

// checkHelloRouting: the Hello names the handlers' types, the release from
// CONVEYOR_RELEASE_ID, and start authorization.
func checkHelloRouting(t *testing.T, cmd []string) {
	f := StartFake(t, time.Minute, 20*time.Second, nil)
	_, s := startOnFake(t, cmd, f, "CONVEYOR_RELEASE_ID", "rel-42", "CONVEYOR_BATCH_TYPES", "conformance.batch")
	h := s.Hello
	for _, typ := range []string{"conformance.echo", "conformance.sleep", "conformance.once", "conformance.batch"} {
		if !slices.Contains(h.GetTypes(), typ) {
			t.Errorf("Hello.types = %v, want it to name %s", h.GetTypes(), typ)
		}
	}
	if h.GetReleaseId() != "rel-42" {
		t.Errorf("Hello.release_id = %q, want rel-42", h.GetReleaseId())
	}
	if !h.GetStartAuthorization() {
		t.Error("Hello.start_authorization is false")
	}
}

// startFrames lists the attempt ids of the Start frames s received.
func startFrames(s *FakeSession) []string {
	var out []string
	for _, f := range s.Frames() {
		if st := f.Msg.GetStart(); st != nil {
			out = append(out, st.GetAttemptId())
		}
	}
	return out
}

func dispatchOnce(s *FakeSession, id, attempt string) {
	s.Send(&conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Dispatch{Dispatch: &conveyorv1.Dispatch{
		Task: Envelope(id, attempt, "conformance.echo", `"once"`), AttemptId: attempt, StartRequired: true,
		Deadline: timestamp(time.Now().Add(time.Minute))}}})
}

func decide(s *FakeSession, attempt string, authorized bool) {
	d := &conveyorv1.StartDecision{AttemptId: attempt, Authorized: authorized}
	if !authorized {
		d.Reason = "the lease is no longer current"
	}
	s.Send(&conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_StartDecision{StartDecision: d}})
}

// checkStartAuthorization: a start_required delivery is asked for with
// Start and runs only once authorized; a refused one never runs and is
// answered with no Result.
func checkStartAuthorization(t *testing.T, cmd []string) {
	f := StartFake(t, time.Minute, time.Second, nil)
	_, s := startOnFake(t, cmd, f)
	dispatchOnce(s, "ok", "ok-a")
	dispatchOnce(s, "no", "no-a")
	testwait.Until(t, short, "Start for both attempts", func() bool {
		st := startFrames(s)
		return slices.Contains(st, "ok-a") && slices.Contains(st, "no-a")
	})
	if r := s.Results("ok-a"); len(r) != 0 {
		t.Fatalf("a Result %v before the start was authorized", r)
	}
	waitHeartbeatListing(t, s, "ok", "ok-a") // held while it waits
	decide(s, "no-a", false)
	decide(s, "ok-a", true)
	if r := waitResult(t, s, "ok-a", short); r.GetOutcome() != conveyorv1.TaskOutcome_TASK_OUTCOME_SUCCESS {
		t.Fatalf("the authorized attempt's Result: %v", r)
	}
	// A last round trip, so that a Result of the refused attempt would
	// have arrived.
	s.Dispatch("last", "last-a", "conformance.echo", `1`, time.Time{})
	waitResult(t, s, "last-a", short)
	if r := s.Results("no-a"); len(r) != 0 {
		t.Fatalf("the refused attempt was answered: %v", r)
	}
	if st := startFrames(s); slices.Contains(st, "last-a") {
		t.Fatal("Start sent for a delivery without start_required")
	}
}

// onceLines reads the conformance.once log: one task id a line.
func onceLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// checkAtMostOnceServer: on a real server, at-most-once tasks each run
// exactly once; a typed worker is not sent a type it has no handler for.
func checkAtMostOnceServer(t *testing.T, cmd []string) {
	e := startReal(t, server.Config{})
	log := filepath.Join(t.TempDir(), "once.log")
	p := Start(t, cmd, workerEnv(e.srv.URL(), "CONVEYOR_ONCE_LOG", log))
	p.WaitReady(short)
	unknown := e.enqueue("conformance.nobody-handles-this", `{}`, nil)
	var ids []string
	for range 5 {
		ids = append(ids, e.enqueue("conformance.once", `{}`, &conveyorv1.TaskOptions{AtMostOnce: true}))
	}
	for _, id := range ids {
		e.waitFor(id, "completed", inState(conveyorv1.TaskState_TASK_STATE_COMPLETED))
	}
	got := onceLines(t, log)
	slices.Sort(got)
	want := slices.Clone(ids)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("conformance.once ran %v, want each of %v once", got, want)
	}
	if ti := e.get(unknown); ti.GetState() != conveyorv1.TaskState_TASK_STATE_PENDING || ti.GetRetried() != 0 {
		t.Fatalf("a type the worker has no handler for: %v retried %d, want PENDING and untouched", ti.GetState(), ti.GetRetried())
	}
}

// checkReleaseDrain: with two workers of releases old and new, work goes
// to the new one; once it is drained, to the old one.
func checkReleaseDrain(t *testing.T, cmd []string) {
	e := startReal(t, server.Config{})
	dir := t.TempDir()
	oldLog, newLog := filepath.Join(dir, "old.log"), filepath.Join(dir, "new.log")
	Start(t, cmd, workerEnv(e.srv.URL(), "CONVEYOR_RELEASE_ID", "old", "CONVEYOR_ONCE_LOG", oldLog)).WaitReady(short)
	Start(t, cmd, workerEnv(e.srv.URL(), "CONVEYOR_RELEASE_ID", "new", "CONVEYOR_ONCE_LOG", newLog)).WaitReady(short)
	first := e.enqueue("conformance.once", `{}`, nil)
	e.waitFor(first, "completed", inState(conveyorv1.TaskState_TASK_STATE_COMPLETED))
	if got := onceLines(t, newLog); !slices.Equal(got, []string{first}) {
		t.Fatalf("the new release ran %v, want %s (old: %v)", got, first, onceLines(t, oldLog))
	}
	if _, err := e.admin.DrainRelease(context.Background(), connect.NewRequest(&conveyorv1.DrainReleaseRequest{ReleaseId: "new"})); err != nil {
		t.Fatal(err)
	}
	second := e.enqueue("conformance.once", `{}`, nil)
	e.waitFor(second, "completed", inState(conveyorv1.TaskState_TASK_STATE_COMPLETED))
	if got := onceLines(t, oldLog); !slices.Equal(got, []string{second}) {
		t.Fatalf("after the drain the old release ran %v, want %s", got, second)
	}
}
