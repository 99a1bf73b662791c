package admin_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

const testToken = "s3cret-dashboard-token"

// TestDashboard drives the dashboard in a real browser against a server
// with a token: a wrong token is refused, the right one lets in, the
// queues show their live counts, a queue is paused and resumed, a failed
// task shows its error, the workers show their sessions. With
// CONVEYOR_SCREENSHOTS set it saves screenshots of those pages.
func TestDashboard(t *testing.T) {
	tb := setup(t, testToken)
	tb.startWorker(t)
	tb.releases(t)
	tb.enqueue(t, "emails", "email:send", 3)
	tb.enqueue(t, "emails", "email:digest", 2, conveyor.ProcessIn(time.Hour))
	done := tb.enqueue(t, "reports", "report:build", 5)
	failing, err := tb.client.Enqueue(ctx(t), "report:build",
		[]byte(`{"report":"q4","mode":"fail","id":12345678901234567890}`), conveyor.Queue("reports"),
		conveyor.MetadataKV("requested-by", "ops@example.com"))
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	failedID := failing.ID
	for _, id := range done {
		tb.waitState(t, id, conveyor.TaskStateCompleted)
	}
	tb.waitState(t, failedID, conveyor.TaskStateArchived)
	resizing := tb.enqueue(t, "media", "image:resize", 2)
	for _, id := range resizing {
		tb.waitState(t, id, conveyor.TaskStateActive)
	}

	b := newBrowser(t, tb.url)

	t.Run("a wrong token is refused", func(t *testing.T) {
		b.t = t
		b.open("/ui/")
		b.do("wait for the login prompt", chromedp.WaitVisible("#token"))
		b.screenshot("login")
		b.do("enter a wrong token", chromedp.SendKeys("#token", "not-the-token"), chromedp.Click(`form button[type="submit"]`))
		b.waitText("#login-error", "refused")
		if got := eval[string](b, "read sessionStorage", `sessionStorage.getItem("conveyor.token") ?? ""`); got != "" {
			t.Errorf("a refused token was kept in sessionStorage: %q", got)
		}
	})

	t.Run("the right token lets in and shows the counts", func(t *testing.T) {
		b.t = t
		b.do("enter the token", chromedp.Clear("#token"), chromedp.SendKeys("#token", testToken), chromedp.Click(`form button[type="submit"]`))
		b.waitTextIs(`tr[data-queue="emails"] td[data-state="pending"]`, "3")
		b.waitTextIs(`tr[data-queue="emails"] td[data-state="scheduled"]`, "2")
		b.waitTextIs(`tr[data-queue="reports"] td[data-state="completed"]`, "5")
		b.waitTextIs(`tr[data-queue="reports"] td[data-state="archived"]`, "1")
		b.waitTextIs(`tr[data-queue="media"] td[data-state="active"]`, "2")
		if got := eval[string](b, "read sessionStorage", `sessionStorage.getItem("conveyor.token") ?? ""`); got != testToken {
			t.Errorf("sessionStorage holds %q, want the token", got)
		}
		if n := eval[int](b, "read localStorage", `localStorage.length`); n != 0 {
			t.Errorf("localStorage holds %d items; the token belongs in sessionStorage only", n)
		}
		// The live numbers follow the server without a reload.
		tb.enqueue(t, "emails", "email:send", 4)
		b.waitTextIs(`tr[data-queue="emails"] td[data-state="pending"]`, "7")
		// The chart is drawn from the server's history of what was enqueued
		// and worked above.
		b.do("wait for the throughput chart", chromedp.Poll[chromedp.Void](
			`(() => { const c = document.querySelector(".chart"); return !!c && c.dataset.state === "drawn" && +c.dataset.completed >= 5; })()`,
			chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
		if screenshots() {
			// Some traffic, for the rates now; the page read anew, for a
			// chart that holds it, with the newest minute hovered.
			tb.traffic(t)
			servertest.Eventually(t, time.Minute, "150 tasks of traffic", func() bool { return tb.enqueued(t, "traffic") >= 150 })
			b.open("/ui/")
			b.waitThroughput(150)
			b.hoverNewest()
		}
		b.screenshot("overview")
	})

	t.Run("pause and resume a queue", func(t *testing.T) {
		b.t = t
		b.do("pause emails", chromedp.Click(`tr[data-queue="emails"] button[data-action="pause"]`))
		b.waitText(`tr[data-queue="emails"] .badge`, "Paused")
		if !tb.queue(t, "emails").GetPaused() {
			t.Fatal("the server says emails is not paused")
		}
		b.do("resume emails", chromedp.Click(`tr[data-queue="emails"] button[data-action="resume"]`))
		b.waitText(`tr[data-queue="emails"] .badge`, "Running")
		if tb.queue(t, "emails").GetPaused() {
			t.Fatal("the server says emails is still paused")
		}
	})

	t.Run("a queue's page", func(t *testing.T) {
		b.t = t
		b.do("open the reports queue", chromedp.Click(`tr[data-queue="reports"] th a`))
		b.waitText("h1", "Queue reports")
		b.waitTextIs(`.cards li[data-state="completed"] .card-n`, "5")
		if n := eval[int](b, "look for a warning", `document.querySelectorAll(".warning").length`); n != 0 {
			t.Errorf("reports, whose types a worker takes, shows %d warnings", n)
		}
		// No worker serving emails takes email:send.
		b.open("/ui/queues/emails")
		b.waitTextIs(`.cards li[data-state="pending"] .card-n`, "7")
		b.waitTextIs(".warning.unserved p", "No live worker takes these types: email:send — their tasks wait.")
		b.screenshot("queue")
	})

	t.Run("a failed task shows its error", func(t *testing.T) {
		b.t = t
		b.open("/ui/tasks/" + failedID)
		b.waitText(".last-error-text", "disk full: cannot write /var/reports/q4.pdf")
		b.waitText("table.errors tbody", "disk full")
		b.waitText(".page-head .badge", "Archived")
		// JSON payloads are indented, their numbers kept verbatim.
		b.waitText("pre.code-json", `"id": 12345678901234567890`)
		b.screenshot("task")
	})

	t.Run("an RPC's error shows its message", func(t *testing.T) {
		b.t = t
		b.open("/ui/tasks/01ARZ3NDEKTSV4RRFFQ69G5FAV")
		b.waitText(`.error[role="alert"]`, "not_found")
	})

	t.Run("a running task shows its progress", func(t *testing.T) {
		b.t = t
		b.open("/ui/tasks/" + resizing[0])
		b.waitText("#prog-h + .progress-row", "40%")
		b.waitText(".panel", "resizing 3 of 8")
	})

	t.Run("the workers", func(t *testing.T) {
		b.t = t
		// The Go SDK's worker is the one on host worker-1.
		res, err := tb.admin.ListWorkers(ctx(t), connect.NewRequest(&conveyorv1.ListWorkersRequest{}))
		if err != nil {
			t.Fatalf("ListWorkers: %v", err)
		}
		var sdk *conveyorv1.WorkerInfo
		for _, w := range res.Msg.GetWorkers() {
			if w.GetLabels()["host"] == "worker-1" {
				sdk = w
			}
		}
		if sdk == nil {
			t.Fatalf("ListWorkers lists no worker on host worker-1: %v", res.Msg.GetWorkers())
		}
		row := fmt.Sprintf(`tr[data-session=%q]`, sdk.GetSessionId())
		b.do("go to the workers", chromedp.Click(`nav a[href="/ui/workers"]`))
		b.waitText(row, "region=eu-west")
		b.waitText(row, "reports=3")
		b.waitText(row+` td[data-label="In flight"]`, "2/4")
		b.waitText(row+` td[data-label="Tasks"]`, resizing[0])
		// Its host and pid in a column of their own, not among the labels;
		// each held task with its type and the progress its handler reported.
		b.waitTextIs(row+` td[data-label="Host (pid)"]`, fmt.Sprintf("worker-1 (%d)", os.Getpid()))
		if labels := b.text(row + ` td[data-label="Labels"]`); strings.Contains(labels, "host=") || strings.Contains(labels, "pid=") {
			t.Errorf("the labels repeat the host and pid: %q", labels)
		}
		held := fmt.Sprintf(`%s li[data-held=%q]`, row, resizing[0])
		b.waitText(held, "image:resize")
		b.waitText(held, "40%")
		b.waitText(held, "resizing 3 of 8")
		b.waitText(`tr[data-release="2026.12.01-9f8e7d"] td[data-label="Status"]`, "Draining")
		// The Node column shows when the server is one of several nodes
		// (on PostgreSQL), with the node of the session.
		if node := sdk.GetNodeId(); node != "" {
			b.waitTextIs(row+` td[data-label="Node"]`, node)
		} else if n := eval[int](b, "count the Node cells", `[...document.querySelectorAll("table.workers th[scope=col]")].filter((h) => h.textContent === "Node").length + document.querySelectorAll('td[data-label="Node"]').length`); n != 0 {
			t.Errorf("a lone node shows a Node column (%d cells)", n)
		}
		b.screenshot("workers")
	})

	t.Run("a phone-width screen and the dark scheme", func(t *testing.T) {
		b.t = t
		b.colorScheme("dark")
		b.open("/ui/")
		b.waitTextIs(`tr[data-queue="emails"] td[data-state="pending"]`, "7")
		if screenshots() {
			b.waitThroughput(150)
		}
		b.screenshot("overview-dark")
		b.do("phone viewport", chromedp.EmulateViewport(390, 844))
		b.open("/ui/")
		b.waitTextIs(`tr[data-queue="emails"] td[data-state="pending"]`, "7")
		if screenshots() {
			b.waitThroughput(150)
		}
		if overflow := eval[bool](b, "measure the page width", `document.documentElement.scrollWidth > innerWidth + 1`); overflow {
			t.Errorf("at 390 px wide the page scrolls sideways (%d px)", eval[int](b, "read scrollWidth", `document.documentElement.scrollWidth`))
		}
		b.screenshot("overview-phone")
		b.colorScheme("light")
		b.do("desktop viewport", chromedp.EmulateViewport(1280, 800))
	})

	t.Run("sign out", func(t *testing.T) {
		b.t = t
		b.do("sign out", chromedp.Click(`.top-end button`))
		b.do("wait for the login prompt", chromedp.WaitVisible("#token"))
		if got := eval[string](b, "read sessionStorage", `sessionStorage.getItem("conveyor.token") ?? ""`); got != "" {
			t.Errorf("after signing out sessionStorage holds %q", got)
		}
	})
}

// TestDashboardWithoutToken: a server without a token shows the dashboard
// at once, and its browser guard lets the dashboard's own (same-origin)
// requests through.
func TestDashboardWithoutToken(t *testing.T) {
	tb := setup(t, "")
	tb.enqueue(t, "default", "hello", 2)
	b := newBrowser(t, tb.url)
	b.open("/")
	b.waitTextIs(`tr[data-queue="default"] td[data-state="pending"]`, "2")
	if strings.Contains(b.text("header"), "Sign out") {
		t.Error("a server without a token shows Sign out")
	}
}
