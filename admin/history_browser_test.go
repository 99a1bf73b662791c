package admin_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestDashboardHistory checks that the throughput charts draw the history
// the server keeps (GetQueueHistory), not what the open tab measured: an
// empty server says that history starts with the first task; once tasks
// were enqueued and worked, the overview's chart holds every queue's
// counts and a queue's page that queue's, on a first page load; hovering
// shows a bucket's time and counts; a range of days holds them too; and
// after the server restarts, a fresh page load draws the same history.
// The page open when the first queues appear reads the history again at
// once, rather than at the next minute.
func TestDashboardHistory(t *testing.T) {
	tb := setup(t, "")
	b := newBrowser(t, tb.url)

	t.Run("an empty server has no history yet", func(t *testing.T) {
		b.t = t
		b.open("/ui/")
		b.waitTextIs(".chart .chart-note", "No history yet: history starts with the first task.")
		if got := b.attr(".chart", "data-points"); got != "0" {
			t.Errorf("the chart of an empty server has %s points", got)
		}
	})

	// orders: 6 enqueued, 4 completed, 2 failed for good; idle: 3
	// enqueued, none worked.
	tb.workOrders(t, 4, 2)
	tb.enqueue(t, "idle", "noop", 3)

	t.Run("the first queues' history shows without a reload", func(t *testing.T) {
		b.t = t
		b.waitChart(9, 4, 2)
	})

	t.Run("the overview charts every queue", func(t *testing.T) {
		b.t = t
		b.open("/ui/")
		b.waitChart(9, 4, 2)
		b.waitText(".chart-totals", "9 enqueued")
		b.waitText(".chart figcaption", "All queues, tasks per minute, last hour")
		if n := eval[int](b, "count the points", `+document.querySelector(".chart").dataset.points`); n < 1 || n > 60 {
			t.Errorf("the last hour's chart has %d points, want 1 to 60", n)
		}
	})

	t.Run("hovering shows a bucket", func(t *testing.T) {
		b.t = t
		b.hoverNewest()
		tip := b.text(".chart-tip")
		for _, re := range []string{`\b20\d\d\b`, `\d+ enqueued`, `\d+ completed`, `\d+ failed`} {
			if !regexp.MustCompile(re).MatchString(tip) {
				t.Errorf("the tooltip %q does not match %s", tip, re)
			}
		}
	})

	t.Run("a range of days", func(t *testing.T) {
		b.t = t
		b.do("choose 7 days", chromedp.Click(`.range-picker button[data-range="7d"]`))
		b.waitAttr(".chart", "data-range", "7d")
		b.waitChart(9, 4, 2)
		b.waitText(".chart figcaption", "All queues, tasks per day, last 7 days")
		if got := b.attr(`.range-picker button[data-range="7d"]`, "aria-pressed"); got != "true" {
			t.Errorf("the 7 d button's aria-pressed is %q", got)
		}
		b.do("back to an hour", chromedp.Click(`.range-picker button[data-range="1h"]`))
		b.waitAttr(".chart", "data-range", "1h")
	})

	t.Run("a queue's page charts that queue", func(t *testing.T) {
		b.t = t
		b.open("/ui/queues/orders")
		b.waitChart(6, 4, 2)
		b.waitText(".chart figcaption", "orders, tasks per minute, last hour")
		b.open("/ui/queues/idle")
		b.waitChart(3, 0, 0)
	})

	tb.srv = servertest.Restart(t, tb.srv)

	t.Run("after a restart the history is still drawn", func(t *testing.T) {
		b.t = t
		b.open("/ui/queues/orders")
		b.waitChart(6, 4, 2)
		b.open("/ui/")
		b.waitChart(9, 4, 2)
	})
}

// waitChart waits until the chart draws history whose range holds these
// totals.
func (b *browser) waitChart(enqueued, completed, failed int) {
	b.t.Helper()
	expr := fmt.Sprintf(`(() => { const c = document.querySelector(".chart"); return !!c && c.dataset.state === "drawn" &&
		c.dataset.enqueued === "%d" && c.dataset.completed === "%d" && c.dataset.failed === "%d"; })()`, enqueued, completed, failed)
	b.do(fmt.Sprintf("wait for a chart of %d enqueued, %d completed, %d failed", enqueued, completed, failed),
		chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
}

// hoverNewest moves the pointer over the chart's right edge, the current
// minute or day, and waits for its tooltip.
func (b *browser) hoverNewest() {
	b.t.Helper()
	xy := eval[[]float64](b, "find the plot", `(() => { const r = document.querySelector(".chart .u-over").getBoundingClientRect();
		return [r.right - 2, r.top + r.height / 2]; })()`)
	b.do("hover the newest bucket", chromedp.MouseEvent(input.DispatchMouseEventTypeMouseMoved, xy[0], xy[1]))
	b.waitText(".chart-tip", "so far")
}

// waitThroughput waits until the chart holds at least enqueued tasks and
// the rates now show figures.
func (b *browser) waitThroughput(enqueued int) {
	b.t.Helper()
	expr := fmt.Sprintf(`(() => { const c = document.querySelector(".chart"), r = document.querySelector(".rate-enqueued dd");
		return !!c && !!r && c.dataset.state === "drawn" && +c.dataset.enqueued >= %d && /\d/.test(r.innerText); })()`, enqueued)
	b.do(fmt.Sprintf("wait for a chart of %d tasks and the rates", enqueued),
		chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
}

// waitAttr waits until the element sel matches has the attribute name
// equal to want.
func (b *browser) waitAttr(sel, name, want string) {
	b.t.Helper()
	expr := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && e.getAttribute(%q) === %q; })()`, sel, name, want)
	b.do(fmt.Sprintf("wait for %s's %s to be %q", sel, name, want),
		chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
}

// workOrders enqueues ok+bad tasks into the queue "orders" and has a
// worker, gone before the test goes on, complete the ok ones and fail the
// bad ones for good.
func (b *testBundle) workOrders(t *testing.T, ok, bad int) {
	t.Helper()
	ids := b.enqueue(t, "orders", "order:ship", ok)
	failing := b.enqueue(t, "orders", "order:ship", bad, conveyor.Metadata(map[string]string{"fail": "yes"}))
	w := b.worker(t, "orders")
	w.HandleFunc("order:ship", func(_ context.Context, dl *conveyor.Delivery) error {
		if dl.Metadata["fail"] == "yes" {
			return conveyor.SkipRetry(errors.New("carrier refused the parcel"))
		}
		return nil
	})
	stop := runWorker(t, w)
	for _, id := range ids {
		b.waitState(t, id, conveyor.TaskStateCompleted)
	}
	for _, id := range failing {
		b.waitState(t, id, conveyor.TaskStateArchived)
	}
	stop()
}
