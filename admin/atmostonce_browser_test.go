package admin_test

import (
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestDashboardAtMostOnce: an at-most-once task says so on its page; one
// whose authorized start ended with no result (its worker left) explains
// that it may or may not have run and that Run now runs it again. Run now
// then leaves it waiting, and its queue, served only by a worker that does
// not ask before it starts a task, names its type as unserved.
func TestDashboardAtMostOnce(t *testing.T) {
	tb := setup(t, "")
	hc := servertest.HTTPClient()
	t.Cleanup(hc.CloseIdleConnections)
	res, err := conveyorv1connect.NewTaskServiceClient(hc, tb.url, connect.WithGRPC()).Enqueue(ctx(t), connect.NewRequest(&conveyorv1.EnqueueRequest{
		Queue: "payments", Type: "payment:capture", Payload: []byte(`{"order":42}`),
		Options: &conveyorv1.TaskOptions{AtMostOnce: true},
	}))
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	id := res.Msg.GetTask().GetId()
	// A worker that does not ask is never given the task; one that asks
	// is, starts it and leaves before it answers.
	tb.openSession(t, &conveyorv1.Hello{Queues: map[string]int32{"payments": 1}, Concurrency: 1, SdkVersion: "test"})
	asks := tb.openSession(t, &conveyorv1.Hello{Queues: map[string]int32{"payments": 1}, Concurrency: 1, SdkVersion: "test", StartAuthorization: true})
	d := asks.nextDispatch()
	if d.GetTask().GetId() != id || !d.GetStartRequired() {
		t.Fatalf("dispatch %v, want %s with start_required", d, id)
	}
	if dec := asks.start(d.GetAttemptId()); !dec.GetAuthorized() {
		t.Fatalf("the start was refused: %v", dec)
	}
	asks.close()
	info := tb.waitState(t, id, conveyor.TaskStateArchived)
	if !strings.HasPrefix(info.LastError, "outcome unknown:") {
		t.Fatalf("the archived task's last error is %q, want outcome unknown", info.LastError)
	}

	b := newBrowser(t, tb.url)
	b.open("/ui/tasks/" + id)
	b.waitText(".last-error-text", "outcome unknown:")
	b.waitText(".outcome-unknown", "This task may or may not have run.")
	b.waitText(".outcome-unknown", "Run now runs it again")
	b.waitText("dl.summary", "at most once")

	b.do("run it again", chromedp.Click(`[role="toolbar"] button:not(.danger)`))
	b.waitText(".page-head .badge", "Pending")
	if n := eval[int](b, "look for the note", `document.querySelectorAll(".outcome-unknown").length`); n != 0 {
		t.Errorf("a task made pending again still shows the outcome-unknown note")
	}
	b.open("/ui/queues/payments")
	b.waitTextIs(".warning.unserved p", "No live worker takes these types: payment:capture — their tasks wait.")
}
