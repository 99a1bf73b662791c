package admin_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// TestDashboardAcrossQueues drives the views across queues against a
// server whose failed tasks are spread over three queues, one of them
// holding more than the view takes from a queue: the failed view lists
// every queue's retrying and archived tasks merged, with a link to the
// rest of the big one; the retry tab only the retrying ones; and the
// header's box opens a task by id, or says that no task has it.
func TestDashboardAcrossQueues(t *testing.T) {
	tb := setup(t, "")
	billing := tb.archiveFailing(t, "billing", 105)
	mail := tb.retryFailing(t, "mail", 3)
	smsArchived := tb.archiveFailing(t, "sms", 2)
	smsRetry := tb.retryFailing(t, "sms", 2)
	tb.enqueue(t, "default", "hello", 4)

	b := newBrowser(t, tb.url)
	rows := func(want int) {
		t.Helper()
		b.do(fmt.Sprintf("wait for %d rows", want), chromedp.Poll[chromedp.Void](
			fmt.Sprintf(`document.querySelectorAll("tr[data-task]").length === %d`, want),
			chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
	}
	queueOf := func(id string) string {
		t.Helper()
		return b.text(fmt.Sprintf(`tr[data-task=%q] td[data-label="Queue"]`, id))
	}

	t.Run("the failed tasks of every queue", func(t *testing.T) {
		b.t = t
		b.open("/ui/")
		b.waitTextIs(`tr[data-queue="billing"] td[data-state="archived"]`, "105")
		b.do("go across queues", chromedp.Click(`nav a[href="/ui/across"]`))
		b.waitText("h1", "Tasks across queues")
		// 100 of billing's 105, and all of mail's and sms's.
		rows(100 + 3 + 4)
		for id, queue := range map[string]string{billing[0]: "billing", billing[99]: "billing", mail[2]: "mail", smsArchived[0]: "sms", smsRetry[1]: "sms"} {
			if got := queueOf(id); got != queue {
				t.Errorf("task %s shows queue %q, want %q", id, got, queue)
			}
		}
		if n := eval[int](b, "look for billing's 101st", fmt.Sprintf(`document.querySelectorAll('tr[data-task=%q]').length`, billing[100])); n != 0 {
			t.Errorf("billing's 101st task is listed; the view takes 100 a queue")
		}
		// Merged by id: the order they were enqueued in, whatever the queue.
		ids := eval[[]string](b, "read the rows", `[...document.querySelectorAll("tr[data-task]")].map(e => e.dataset.task)`)
		for i := 1; i < len(ids); i++ {
			if ids[i-1] >= ids[i] {
				t.Fatalf("rows %d and %d are out of id order: %s, %s", i-1, i, ids[i-1], ids[i])
			}
		}
		more := `.more-queues li[data-queue="billing"][data-state="archived"]`
		b.waitText(more, "billing: all 105 archived")
		b.waitText(more, "100 shown here")
		if n := eval[int](b, "count the more links", `document.querySelectorAll(".more-queues li").length`); n != 1 {
			t.Errorf("%d queues have a more link, want billing alone", n)
		}
		b.waitTextIs(`.tabs a[data-state="failed"] .tab-n`, "112")
		b.screenshot("across")
		b.do("follow the more link", chromedp.Click(more+" a"))
		b.waitText(".pager", "Page 1 · 50 shown")
		if got := eval[string](b, "read the URL", `location.pathname + location.search`); got != "/ui/tasks?queue=billing&state=archived" {
			t.Errorf("the more link leads to %s", got)
		}
	})

	t.Run("one state across queues", func(t *testing.T) {
		b.t = t
		b.open("/ui/across")
		rows(107)
		b.do("the retry tab", chromedp.Click(`.tabs a[data-state="retry"]`))
		rows(5)
		for _, id := range append(append([]string{}, mail...), smsRetry...) {
			b.waitText(fmt.Sprintf(`tr[data-task=%q] td[data-label="State"]`, id), "Retry")
		}
		b.do("the pending tab", chromedp.Click(`.tabs a[data-state="pending"]`))
		rows(4)
		b.do("the canceled tab", chromedp.Click(`.tabs a[data-state="canceled"]`))
		b.waitText(".empty", "No canceled task in any of the 4 queues.")
	})

	t.Run("open a task by id from the header", func(t *testing.T) {
		b.t = t
		b.open("/ui/workers")
		b.do("type an id", chromedp.SendKeys("#task-search", mail[1]+"\n"))
		b.waitText("h1", "Task "+mail[1])
		b.waitText(".page-head .badge", "Retry")
		if v := eval[string](b, "read the box", `document.querySelector("#task-search").value`); v != "" {
			t.Errorf("the box still holds %q after opening the task", v)
		}
		const unknown = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
		b.do("type an unknown id", chromedp.SendKeys("#task-search", unknown+"\n"))
		b.waitTextIs("#task-search-note", "No task has the id "+unknown+".")
		// The page stays where it was.
		b.waitText("h1", "Task "+mail[1])
	})
}

// retryFailing puts n tasks into queue in state RETRY: a worker fails
// each once with a plain error, their backoff an hour, and is gone before
// the test goes on.
func (b *testBundle) retryFailing(t *testing.T, queue string, n int) []string {
	t.Helper()
	ids := b.enqueue(t, queue, "deliver", n, conveyor.RetryPolicy(conveyor.RetryStrategyFixed, time.Hour, time.Hour))
	w := b.worker(t, queue)
	w.HandleFunc("deliver", func(context.Context, *conveyor.Delivery) error {
		return errors.New("mailbox unavailable")
	})
	stop := runWorker(t, w)
	for _, id := range ids {
		b.waitState(t, id, conveyor.TaskStateRetry)
	}
	stop()
	return ids
}
