package admin_test

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// TestDashboardQueueStats: a queue's page shows its latency while a ready
// task waits, "nothing waiting" once none does, and the wait and per-type
// run durations of what ran (GetQueueStats).
func TestDashboardQueueStats(t *testing.T) {
	tb := setup(t, "")
	b := newBrowser(t, tb.url)

	tb.enqueue(t, "waiting", "noop", 2)
	t.Run("a waiting queue has a latency", func(t *testing.T) {
		b.t = t
		b.open("/ui/queues/waiting")
		b.waitText(".latency", "the oldest ready task became ready")
		b.waitText("section[aria-labelledby=stats-h]", "No task of this queue has run since this server started.")
	})

	tb.workOrders(t, 3, 1)
	t.Run("a worked queue has its durations by type", func(t *testing.T) {
		b.t = t
		b.open("/ui/queues/orders")
		b.waitText(".latency", "nothing waiting")
		b.waitText(`tr[data-stat=wait]`, "wait (every type)")
		b.waitText(`tr[data-stat=run][data-type="order:ship"]`, "run order:ship")
		if got := eval[string](b, "the run count", `document.querySelector('tr[data-stat=run] td.num').innerText`); got != "4" {
			t.Errorf("the run row counts %q attempts, want 4", got)
		}
		if screenshots() {
			b.do("scroll to the panel", chromedp.ScrollIntoView("section[aria-labelledby=stats-h]"))
		}
		b.screenshot("queue-stats")
	})
}
