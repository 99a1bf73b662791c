package admin_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// TestDashboardTaskBrowser drives the pages built on AdminService's task
// listing and actions, groups, queue configuration and cron RPCs: page
// through a queue's tasks, filter them by type and by a search, retry a
// whole state in bulk and see the counts change, act on a selection, edit
// a queue's configuration, see a group waiting, create and pause a cron
// entry.
func TestDashboardTaskBrowser(t *testing.T) {
	tb := setup(t, testToken)
	tb.enqueue(t, "notify", "email:send", 110)
	tb.enqueue(t, "notify", "sms:send", 30)
	tb.enqueue(t, "notify", "digest", 3, conveyor.Group("batch-1"))
	tb.archiveFailing(t, "billing", 12)

	b := newBrowser(t, tb.url)
	b.open("/ui/")
	b.do("sign in", chromedp.SendKeys("#token", testToken), chromedp.Click(`form button[type="submit"]`))
	b.waitTextIs(`tr[data-queue="notify"] td[data-state="pending"]`, "140")
	taskBrowserFlows(t, b, tb.admin)
}

// archiveFailing puts n tasks into queue in state ARCHIVED: a worker fails
// each for good (SkipRetry), and is gone before the test goes on, so that
// a task run again stays pending. It returns their ids.
func (b *testBundle) archiveFailing(t *testing.T, queue string, n int) []string {
	t.Helper()
	ids := b.enqueue(t, queue, "charge", n)
	w := b.worker(t, queue)
	w.HandleFunc("charge", func(context.Context, *conveyor.Delivery) error {
		return conveyor.SkipRetry(errors.New("card declined"))
	})
	stop := runWorker(t, w)
	for _, id := range ids {
		b.waitState(t, id, conveyor.TaskStateArchived)
	}
	stop()
	return ids
}

// taskBrowserFlows runs the task browser's flows on a server that holds,
// in queue "notify", 110 pending "email:send" and 30 pending "sms:send"
// tasks whose payloads name user<i>@example.com (i from 0), and a group
// "batch-1" of 3 "digest" tasks; and 12 archived "charge" tasks in queue
// "billing". The browser is signed in.
func taskBrowserFlows(t *testing.T, b *browser, adm conveyorv1connect.AdminServiceClient) {
	rows := func(want int) {
		t.Helper()
		b.do(fmt.Sprintf("wait for %d rows", want), chromedp.Poll[chromedp.Void](
			fmt.Sprintf(`document.querySelectorAll("tr[data-task]").length === %d`, want),
			chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
	}
	shownIDs := func() []string {
		t.Helper()
		return eval[[]string](b, "read the rows", `[...document.querySelectorAll("tr[data-task]")].map(e => e.dataset.task)`)
	}
	counts := func(queue string) *conveyorv1.QueueInfo {
		t.Helper()
		c, cancel := context.WithTimeout(context.Background(), stepTimeout)
		defer cancel()
		res, err := adm.ListQueues(c, connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
		if err != nil {
			t.Fatalf("ListQueues: %v", err)
		}
		for _, q := range res.Msg.GetQueues() {
			if q.GetName() == queue {
				return q
			}
		}
		t.Fatalf("no queue %s", queue)
		return nil
	}
	call := func() context.Context {
		c, cancel := context.WithTimeout(context.Background(), stepTimeout)
		t.Cleanup(cancel)
		return c
	}

	t.Run("page through the tasks", func(t *testing.T) {
		b.t = t
		b.open("/ui/tasks?queue=notify&state=pending")
		b.waitText(".pager", "Page 1 · 50 shown")
		seen := map[string]bool{}
		for _, id := range shownIDs() {
			seen[id] = true
		}
		b.do("next page", chromedp.Click(`.pager button`))
		b.waitText(".pager", "Page 2 · 50 shown")
		for _, id := range shownIDs() {
			if seen[id] {
				t.Errorf("task %s is on page 1 and page 2", id)
			}
		}
		b.do("next page", chromedp.Click(`.pager button`))
		// 140 tasks: the last page is not full, so it is the last even
		// for a server that offers a page after a full one.
		b.waitText(".pager", "Page 3 · 40 shown")
		b.do("no page after the last", chromedp.WaitNotPresent(`.pager button`))
		b.screenshot("tasks")
		b.do("previous page", chromedp.Click(`.pager a[rel="prev"]`))
		b.waitText(".pager", "Page 2")
		b.do("the back button", chromedp.NavigateBack())
		b.waitText(".pager", "Page 3")
	})

	t.Run("filter by type and by a search", func(t *testing.T) {
		b.t = t
		b.open("/ui/tasks?queue=notify&state=pending")
		rows(50)
		b.do("filter by type", chromedp.SendKeys("#f-type", "sms:send"), chromedp.Click(`.filters button[type="submit"]`))
		b.waitText(".pager", "30 shown")
		rows(30)
		if href := eval[string](b, "read the URL", `location.search`); !strings.Contains(href, "type=sms%3Asend") {
			t.Errorf("the filter is not in the URL: %s", href)
		}
		if n := eval[int](b, "count other types", `[...document.querySelectorAll('tr[data-task] td[data-label="Type"]')].filter(e => e.innerText.trim() !== "sms:send").length`); n != 0 {
			t.Errorf("%d rows of another type", n)
		}
		b.do("clear the type", chromedp.Clear("#f-type"), chromedp.SendKeys("#f-search", "user7@"), chromedp.Click(`.filters button[type="submit"]`))
		b.waitText(".pager", "2 shown") // user7@ in one email and one sms payload
		rows(2)
	})

	t.Run("retry a whole state in bulk", func(t *testing.T) {
		b.t = t
		b.open("/ui/tasks?queue=billing&state=archived")
		rows(12)
		b.waitText(`.tabs a[data-state="archived"]`, "12")
		b.do("run them all", chromedp.Click(`.bulk button[data-action="run"]`))
		b.do("confirm", chromedp.Click(`.bulk .confirm button.primary`))
		b.waitText(".bulk .notice", "Done: 12 tasks made pending")
		b.waitText(`.tabs a[data-state="archived"]`, "0")
		b.waitText(`.tabs a[data-state="pending"]`, "12")
		q := counts("billing")
		if q.GetArchived() != 0 || q.GetPending() != 12 {
			t.Errorf("the server counts %d archived and %d pending, want 0 and 12", q.GetArchived(), q.GetPending())
		}
	})

	t.Run("archive a selection", func(t *testing.T) {
		b.t = t
		b.open("/ui/tasks?queue=billing&state=pending")
		rows(12)
		b.do("select two", chromedp.Click(`tr[data-task]:nth-child(1) input[type="checkbox"]`), chromedp.Click(`tr[data-task]:nth-child(2) input[type="checkbox"]`))
		b.waitText(".selection .toolbar", "2 selected")
		b.do("archive them", chromedp.Click(`.selection button[data-action="archive"]`))
		b.do("confirm", chromedp.Click(`.selection .confirm button.danger`))
		b.waitText(".selection .notice", "2 tasks archived")
		rows(10)
		if q := counts("billing"); q.GetArchived() != 2 {
			t.Errorf("the server counts %d archived, want 2", q.GetArchived())
		}
	})

	t.Run("edit a queue's configuration", func(t *testing.T) {
		b.t = t
		b.open("/ui/queues/notify")
		b.do("edit", chromedp.Click(`#config-h + button`))
		// The form starts with the queue's stored values (the group
		// policy's fields empty: they follow the server's defaults).
		for field, v := range map[string]string{"#qc-maxActive": "5", "#qc-perSecond": "10", "#qc-maxDelay": "45s", "#qc-maxWaiting": "2500"} {
			eval[bool](b, "set "+field, fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q;
				e.dispatchEvent(new Event("input", {bubbles: true})); return true })()`, field, v))
		}
		b.do("save", chromedp.Click(`form[aria-label="Queue configuration"] button[type="submit"]`))
		b.waitText(`section[aria-labelledby="config-h"]`, "Configuration saved.")
		b.waitText("dl.config", "10/s, burst 10")
		b.waitText("dl.config", "45s")
		b.waitText("dl.config", "2500")
		res, err := adm.GetQueueConfig(call(), connect.NewRequest(&conveyorv1.GetQueueConfigRequest{Queue: "notify"}))
		if err != nil {
			t.Fatalf("GetQueueConfig: %v", err)
		}
		if c := res.Msg; c.GetMaxActive() != 5 || c.GetRateLimit().GetPerSecond() != 10 || c.GetGroupPolicy().GetMaxDelay().AsDuration() != 45*time.Second ||
			c.GetMaxWaiting() != 2500 {
			t.Errorf("the server stored %v", c)
		}
		// What the form did not change still follows the defaults.
		res, err = adm.GetQueueConfig(call(), connect.NewRequest(&conveyorv1.GetQueueConfigRequest{Queue: "notify", Stored: true}))
		if err != nil {
			t.Fatalf("GetQueueConfig(stored): %v", err)
		}
		if g := res.Msg.GetGroupPolicy(); g.GetMaxSize() != 0 || g.GetGracePeriod() != nil {
			t.Errorf("the form stored the server's group defaults as the queue's own: %v", g)
		}
		b.waitText("dl.config", "(server default)")
	})

	t.Run("a group waiting", func(t *testing.T) {
		b.t = t
		b.do("go to the groups", chromedp.Click(`nav a[href="/ui/groups"]`))
		b.waitText("table tbody", "batch-1")
		b.waitText(`td[data-label="Size"]`, "3")
		b.screenshot("groups")
	})

	t.Run("create and pause a cron entry", func(t *testing.T) {
		b.t = t
		b.do("go to cron", chromedp.Click(`nav a[href="/ui/crons"]`))
		b.do("new entry", chromedp.Click(`a[href="/ui/crons/new"]`))
		b.do("fill the form",
			chromedp.SendKeys("#cron-id", "nightly-report"),
			chromedp.SendKeys("#cron-spec", "0 3 * * *"),
			chromedp.SendKeys("#cron-queue", "reports"),
			chromedp.SendKeys("#cron-type", "report:build"),
			chromedp.SendKeys("#cron-payload", `{"report":"daily"}`),
			chromedp.SendKeys("#cron-metadata", "team=ops"),
		)
		b.screenshot("cron-new")
		b.do("create", chromedp.Click(`form button[type="submit"]`))
		b.waitText(".notice", "Created nightly-report.")
		b.waitText(`tr[data-cron="nightly-report"]`, "0 3 * * *")
		b.waitText(`tr[data-cron="nightly-report"]`, "report:build")
		res, err := adm.GetCron(call(), connect.NewRequest(&conveyorv1.GetCronRequest{Id: "nightly-report"}))
		if err != nil {
			t.Fatalf("GetCron: %v", err)
		}
		if e := res.Msg; e.GetSpec() != "0 3 * * *" || e.GetQueue() != "reports" || string(e.GetPayload()) != `{"report":"daily"}` || e.GetMetadata()["team"] != "ops" {
			t.Errorf("the server stored %v", e)
		}
		b.screenshot("crons")
		b.do("pause it", chromedp.Click(`tr[data-cron="nightly-report"] button[aria-label="Pause nightly-report"]`))
		b.waitText(`tr[data-cron="nightly-report"] .badge`, "Paused")
		res, err = adm.GetCron(call(), connect.NewRequest(&conveyorv1.GetCronRequest{Id: "nightly-report"}))
		if err != nil || !res.Msg.GetPaused() {
			t.Errorf("the server says the entry is not paused (%v)", err)
		}

		// Saving the edit form changes what it edits, and keeps a resume
		// another operator made while it was open.
		b.do("edit it", chromedp.Click(`tr[data-cron="nightly-report"] a[aria-label="Edit nightly-report"]`))
		b.do("wait for the form to load the entry", chromedp.Poll[chromedp.Void](
			`document.querySelector("#cron-type")?.value === "report:build"`,
			chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
		if _, err := adm.ResumeCron(call(), connect.NewRequest(&conveyorv1.ResumeCronRequest{Id: "nightly-report"})); err != nil {
			t.Fatalf("ResumeCron: %v", err)
		}
		b.do("change the type", chromedp.Evaluate[chromedp.Void](`document.querySelector("#cron-type").select()`),
			chromedp.SendKeys("#cron-type", "report:weekly"))
		b.do("save", chromedp.Click(`form button[type="submit"]`))
		b.waitText(".notice", "Saved nightly-report.")
		res, err = adm.GetCron(call(), connect.NewRequest(&conveyorv1.GetCronRequest{Id: "nightly-report"}))
		if err != nil || res.Msg.GetType() != "report:weekly" || res.Msg.GetPaused() || res.Msg.GetQueue() != "reports" {
			t.Errorf("after the form's save the server has %v (%v); want type report:weekly, queue reports, not paused", res.Msg, err)
		}
	})
}
