package admin_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server/servertest"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
)

// TestDashboardHardCases drives the dashboard against data an operator
// meets in production but the other browser tests do not make.
func TestDashboardHardCases(t *testing.T) {
	tb := setup(t, testToken)
	b := newBrowser(t, tb.url)
	b.open("/ui/")
	b.do("sign in", chromedp.SendKeys("#token", testToken), chromedp.Click(`form button[type="submit"]`))
	b.do("wait for the overview", chromedp.WaitVisible("#queues-h"))

	t.Run("a deeply nested JSON payload shows", func(t *testing.T) {
		b.t = t
		// 200 KiB of JSON whose indentation would be some 600 MB: the
		// page must show it (as text) rather than freeze or crash.
		payload := strings.Repeat("[", 3000) + strings.Repeat("1,", 100_000) + "1" + strings.Repeat("]", 3000)
		task, err := tb.client.Enqueue(ctx(t), "deep", []byte(payload), conveyor.Queue("odd"))
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		b.open("/ui/tasks/" + task.ID)
		b.waitText("h1", task.ID)
		b.waitText(`section[aria-labelledby="payload-h"]`, "[[[[")
		b.waitText(`section[aria-labelledby="meta-h"]`, "No metadata.")
	})

	t.Run("editing a cron entry keeps its binary payload", func(t *testing.T) {
		b.t = t
		payload := []byte{0x08, 0x96, 0x01, 0xff, 0x00, 0xc3}
		_, err := tb.admin.CreateCron(ctx(t), connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: &conveyorv1.CronEntry{
			Id: "proto-feed", Spec: "@every 1h", Queue: "feeds", Type: "feed:pull",
			Payload: payload, ContentType: "application/x-protobuf",
		}}))
		if err != nil {
			t.Fatalf("CreateCron: %v", err)
		}
		b.open("/ui/crons/proto-feed/edit")
		b.do("wait for the form to load the entry", chromedp.Poll[chromedp.Void](
			`document.querySelector("#cron-type")?.value === "feed:pull"`,
			chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
		b.do("change the schedule", chromedp.Evaluate[chromedp.Void](`document.querySelector("#cron-spec").select()`),
			chromedp.SendKeys("#cron-spec", "@every 2h"))
		b.do("save", chromedp.Click(`form button[type="submit"]`))
		b.waitText(".notice", "Saved proto-feed.")
		res, err := tb.admin.GetCron(ctx(t), connect.NewRequest(&conveyorv1.GetCronRequest{Id: "proto-feed"}))
		if err != nil {
			t.Fatalf("GetCron: %v", err)
		}
		if res.Msg.GetSpec() != "@every 2h" {
			t.Errorf("spec %q, want @every 2h", res.Msg.GetSpec())
		}
		if got := res.Msg.GetPayload(); !bytes.Equal(got, payload) {
			t.Errorf("saving the schedule changed the payload from % x to % x", payload, got)
		}
	})

	t.Run("saving a queue's configuration keeps a change made meanwhile", func(t *testing.T) {
		b.t = t
		tb.enqueue(t, "limits", "job", 1)
		b.open("/ui/queues/limits")
		b.do("edit", chromedp.Click(`#config-h + button`))
		b.do("wait for the form", chromedp.WaitVisible("#qc-perSecond"))
		// Another operator sets max active while the form is open.
		if _, err := tb.admin.UpdateQueueConfig(ctx(t), connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{
			Config:     &conveyorv1.QueueConfig{Queue: "limits", MaxActive: 7},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"max_active"}},
		})); err != nil {
			t.Fatalf("UpdateQueueConfig: %v", err)
		}
		b.do("set the rate", chromedp.SendKeys("#qc-perSecond", "10"))
		b.do("save", chromedp.Click(`form[aria-label="Queue configuration"] button[type="submit"]`))
		b.waitText(`section[aria-labelledby="config-h"]`, "Configuration saved.")
		res, err := tb.admin.GetQueueConfig(ctx(t), connect.NewRequest(&conveyorv1.GetQueueConfigRequest{Queue: "limits", Stored: true}))
		if err != nil {
			t.Fatalf("GetQueueConfig: %v", err)
		}
		if c := res.Msg; c.GetRateLimit().GetPerSecond() != 10 || c.GetMaxActive() != 7 {
			t.Errorf("the server stored rate %d/s and max active %d, want 10 and 7 (the form's change and the other's)",
				c.GetRateLimit().GetPerSecond(), c.GetMaxActive())
		}
	})

	t.Run("a mangled address shows the not-found page", func(t *testing.T) {
		b.t = t
		// A link cut short in a chat: a percent-escape missing a digit.
		b.open("/ui/tasks/01J%E2%80")
		b.waitText("h1", "No such page")
		b.do("follow the link home", chromedp.Click(`main a[href="/ui/"]`))
		b.waitText("h1", "Queues")
	})

	t.Run("pausing a cron entry during a refresh shows it paused", func(t *testing.T) {
		b.t = t
		if _, err := tb.admin.CreateCron(ctx(t), connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: &conveyorv1.CronEntry{
			Id: "hourly-sync", Spec: "@every 1h", Queue: "sync", Type: "sync:run",
		}})); err != nil {
			t.Fatalf("CreateCron: %v", err)
		}
		b.open("/ui/crons")
		b.waitText(`tr[data-cron="hourly-sync"] .badge`, "Active")
		// The page's next refresh is under way, and slow, when the pause
		// is made: its answer, read before the pause, comes after it.
		b.stopPolls()
		b.holdAnswer("ListCrons")
		b.waitAnswerHeld()
		b.do("pause it", chromedp.Click(`tr[data-cron="hourly-sync"] button[aria-label="Pause hourly-sync"]`))
		b.waitText(".notice", "Paused hourly-sync.")
		b.releaseAnswer()
		// With the periodic refresh an hour away, only the refresh the
		// pause asked for can show it.
		b.do("wait for the entry to show paused", chromedp.Poll[chromedp.Void](
			`document.querySelector('tr[data-cron="hourly-sync"] .badge')?.innerText.includes("Paused")`,
			chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
	})

	t.Run("a bulk action's progress names its own tasks after a tab change", func(t *testing.T) {
		b.t = t
		tb.enqueue(t, "sweep", "job", 3)
		tb.enqueue(t, "sweep", "job", 2, conveyor.ProcessIn(time.Hour))
		b.open("/ui/tasks?queue=sweep&state=scheduled")
		b.waitText(`.tabs a[data-state="scheduled"]`, "2")
		// The stream's answer is held, so that the action is under way
		// when the operator moves on to another tab.
		b.holdAnswer("BulkTasks")
		b.do("archive them all", chromedp.Click(`.bulk button[data-action="archive"]`))
		b.do("confirm", chromedp.Click(`.bulk .confirm button.danger`))
		b.waitText(".bulk-progress", "Starting")
		b.do("go to the pending tab", chromedp.Click(`.tabs a[data-state="pending"]`))
		b.waitText(".pager", "3 shown")
		if label := b.text(".bulk-progress label"); !strings.Contains(label, "scheduled") || strings.Contains(label, "pending") {
			t.Errorf("on the pending tab, the archive of the scheduled tasks is labelled %q", label)
		}
		b.releaseAnswer()
		b.waitText(".bulk .notice", "Done: 2 tasks archived")
		if q := tb.queue(t, "sweep"); q.GetPending() != 3 || q.GetScheduled() != 0 || q.GetArchived() != 2 {
			t.Errorf("the server counts %d pending, %d scheduled, %d archived; want 3, 0, 2", q.GetPending(), q.GetScheduled(), q.GetArchived())
		}
	})

	t.Run("a cron entry whose metadata spans lines can be edited", func(t *testing.T) {
		b.t = t
		meta := map[string]string{"note": "pulls the feed\nthen posts it", "team": "ops"}
		if _, err := tb.admin.CreateCron(ctx(t), connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: &conveyorv1.CronEntry{
			Id: "feed-post", Spec: "@every 1h", Queue: "feeds", Type: "feed:post", Metadata: meta,
		}})); err != nil {
			t.Fatalf("CreateCron: %v", err)
		}
		b.open("/ui/crons/feed-post/edit")
		b.do("wait for the form to load the entry", chromedp.Poll[chromedp.Void](
			`document.querySelector("#cron-type")?.value === "feed:post"`,
			chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
		b.do("change the schedule", chromedp.Evaluate[chromedp.Void](`document.querySelector("#cron-spec").select()`),
			chromedp.SendKeys("#cron-spec", "@every 3h"))
		b.do("save", chromedp.Click(`form button[type="submit"]`))
		b.waitText(".notice", "Saved feed-post.")
		res, err := tb.admin.GetCron(ctx(t), connect.NewRequest(&conveyorv1.GetCronRequest{Id: "feed-post"}))
		if err != nil {
			t.Fatalf("GetCron: %v", err)
		}
		if got := res.Msg.GetMetadata(); len(got) != 2 || got["note"] != meta["note"] || got["team"] != "ops" {
			t.Errorf("saving the schedule changed the metadata from %q to %q", meta, got)
		}
	})

	t.Run("deleting a task returns to the filtered list it was opened from", func(t *testing.T) {
		b.t = t
		tb.enqueue(t, "trim", "keep", 3)
		tb.enqueue(t, "trim", "drop", 2)
		b.open("/ui/tasks?queue=trim&state=pending&type=drop")
		b.waitText(".pager", "2 shown")
		b.do("open the first task", chromedp.Click(`tr[data-task] th a`))
		b.waitText(".page-head .badge", "Pending")
		b.do("delete it", chromedp.Click(`.task-actions button[data-action="delete"]`))
		b.do("confirm", chromedp.Click(`.task-actions .confirm button.danger`))
		b.waitText(".pager", "1 shown")
		if q := eval[string](b, "read the URL", `location.search`); q != "?queue=trim&state=pending&type=drop" {
			t.Errorf("after the delete the list is %s, want the filtered list it was opened from", q)
		}
	})

	t.Run("pausing a queue during a refresh of the counts shows it paused", func(t *testing.T) {
		b.t = t
		tb.enqueue(t, "hold", "job", 1)
		b.open("/ui/")
		b.waitText(`tr[data-queue="hold"] .badge`, "Running")
		// A refresh of the live numbers is under way, and slow, when the
		// queue is paused: its answer, read before the pause, comes after.
		b.stopPolls()
		b.holdAnswer("ListQueues")
		b.waitAnswerHeld()
		b.do("pause it", chromedp.Click(`tr[data-queue="hold"] button[data-action="pause"]`))
		servertest.Eventually(t, stepTimeout, "the server pauses hold", func() bool { return tb.queue(t, "hold").GetPaused() })
		b.do("wait for the pause to be answered", chromedp.WaitEnabled(`tr[data-queue="hold"] button[data-action="pause"]`))
		b.releaseAnswer()
		// With the next poll an hour away, only the refresh the pause
		// asked for can show it.
		b.do("wait for the queue to show paused", chromedp.Poll[chromedp.Void](
			`document.querySelector('tr[data-queue="hold"] .badge')?.innerText.includes("Paused")`,
			chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
	})

	t.Run("a cron entry's 'Created' notice does not come back on a later visit", func(t *testing.T) {
		b.t = t
		b.open("/ui/crons/new")
		b.do("fill the form", chromedp.SendKeys("#cron-id", "once-notice"), chromedp.SendKeys("#cron-spec", "@every 1h"),
			chromedp.SendKeys("#cron-type", "noop"))
		b.do("create", chromedp.Click(`form button[type="submit"]`))
		b.waitText(".notice", "Created once-notice.")
		b.do("go to the workers", chromedp.Click(`nav a[href="/ui/workers"]`))
		b.waitText("h1", "Workers")
		b.do("back to cron", chromedp.Click(`nav a[href="/ui/crons"]`))
		b.waitText(`tr[data-cron="once-notice"]`, "noop")
		if n := eval[int](b, "count the notices", `document.querySelectorAll(".notice").length`); n != 0 {
			t.Errorf("a later visit to the cron page still shows %q", b.text(".notice"))
		}
	})

	t.Run("a bulk action goes on when the operator opens the All tab", func(t *testing.T) {
		b.t = t
		tb.enqueue(t, "bulky", "job", 20_000)
		b.open("/ui/tasks?queue=bulky&state=pending")
		b.waitText(`.tabs a[data-state="pending"]`, "20,000")
		b.do("archive them all", chromedp.Click(`.bulk button[data-action="archive"]`))
		b.do("confirm", chromedp.Click(`.bulk .confirm button.danger`))
		b.do("wait for the progress", chromedp.WaitVisible(".bulk-progress"))
		b.do("open the All tab", chromedp.Click(`.tabs a[data-state=""]`))
		b.waitText(".pager", "50 shown")
		servertest.Eventually(t, stepTimeout, "every task of bulky archived", func() bool {
			return tb.queue(t, "bulky").GetArchived() == 20_000
		})
		b.do("back to the pending tab", chromedp.Click(`.tabs a[data-state="pending"]`))
		b.waitText(".bulk .notice", "Done: 20,000 tasks archived")
	})

	t.Run("a group's link lists that group's tasks, and a bulk action on it acts on them only", func(t *testing.T) {
		b.t = t
		tb.enqueue(t, "digests", "digest", 3, conveyor.Group("monday"))
		tb.enqueue(t, "digests", "digest", 2, conveyor.Group("tuesday"))
		b.open("/ui/groups?queue=digests")
		b.do("open the monday group", chromedp.Click(`a[href*="group=monday"]`))
		b.do("wait for the group's 3 tasks", chromedp.Poll[chromedp.Void](
			`document.querySelectorAll("tr[data-task]").length === 3 && document.querySelector("#f-group")?.value === "monday"`,
			chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
		b.do("cancel every task of the filter", chromedp.Click(`.bulk button[data-action="cancel"]`))
		b.do("confirm", chromedp.Click(`.bulk .confirm button[class]`))
		b.waitText(".bulk .notice", "Done: 3 tasks canceled")
		q := tb.queue(t, "digests")
		if q.GetCanceled() != 3 || q.GetAggregating() != 2 {
			t.Fatalf("after the bulk cancel of the monday group: %v; want its 3 canceled, tuesday's 2 still aggregating", q)
		}
	})
}

// holdAnswer makes the page's next answer to the RPC method wait until
// releaseAnswer, as a slow server would, and asks the page's polls to
// refresh now (a visibilitychange), so that a poll's refresh is the call
// held when method is one a poll makes.
func (b *browser) holdAnswer(method string) {
	b.t.Helper()
	eval[bool](b, "hold the next "+method+" answer", fmt.Sprintf(`(() => {
		const real = window.fetch;
		window.__held = new Promise(r => { window.__release = r; });
		window.__holding = false;
		window.fetch = async (url, init) => {
			const res = await real(url, init);
			if (String(url).endsWith("/" + %q) && !window.__holding) {
				window.__holding = true;
				await window.__held;
			}
			return res;
		};
		document.dispatchEvent(new Event("visibilitychange"));
		return true;
	})()`, method))
}

// stopPolls puts every periodic refresh the page schedules from now on an
// hour away (any timer of a second or more), so that a test tells a
// refresh an action asked for from the next poll by what shows, not by
// how soon: the page's own timers are the only ones that long.
func (b *browser) stopPolls() {
	b.t.Helper()
	eval[bool](b, "put the periodic refreshes an hour away", `(() => {
		const real = window.setTimeout;
		window.setTimeout = (fn, ms, ...args) => real(fn, ms >= 1000 ? 3600000 : ms, ...args);
		return true;
	})()`)
}

// waitAnswerHeld waits until holdAnswer holds an answer.
func (b *browser) waitAnswerHeld() {
	b.t.Helper()
	b.do("wait for an answer to be held", chromedp.Poll[chromedp.Void](`window.__holding === true`,
		chromedp.WithPollingInterval(10*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
}

// releaseAnswer lets the answer holdAnswer held through.
func (b *browser) releaseAnswer() {
	b.t.Helper()
	eval[bool](b, "let the held answer through", `(window.__release(), true)`)
}
