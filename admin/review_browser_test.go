package admin_test

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
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
}
