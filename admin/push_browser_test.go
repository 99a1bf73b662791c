package admin_test

import (
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// TestDashboardPushEndpoint: the queue page shows a queue's push endpoint
// and its form sets one (URL, concurrency, timeout) with update-mask paths
// that leave the queue's other settings alone; the form refuses values out
// of bounds before asking the server, and shows the server's refusal of a
// URL that is not loopback (the server has no push secret). The endpoint
// then shows on the workers page as a worker without a session.
func TestDashboardPushEndpoint(t *testing.T) {
	tb := setup(t, "")
	// A paused queue holding no task: the endpoint is never invoked.
	if _, err := tb.admin.PauseQueue(ctx(t), connect.NewRequest(&conveyorv1.PauseQueueRequest{Queue: "hooks"})); err != nil {
		t.Fatalf("PauseQueue: %v", err)
	}
	const endpoint = "http://127.0.0.1:9/conveyor"
	b := newBrowser(t, tb.url)
	// shown is what the configuration's read-only view says for label.
	shown := func(label, want string) {
		t.Helper()
		b.do(fmt.Sprintf("wait for %s to show %q", label, want), chromedp.Poll[chromedp.Void](fmt.Sprintf(
			`[...document.querySelectorAll("dl.config dt")].some(dt => dt.innerText.trim() === %q && dt.nextElementSibling.innerText.trim() === %q)`,
			label, want), chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
	}
	set := func(fields map[string]string) {
		t.Helper()
		for field, v := range fields {
			eval[bool](b, "set "+field, fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q;
				e.dispatchEvent(new Event("input", {bubbles: true})); return true })()`, field, v))
		}
	}
	save := func() {
		t.Helper()
		b.do("save", chromedp.Click(`form[aria-label="Queue configuration"] button[type="submit"]`))
	}
	stored := func() *conveyorv1.QueueConfig {
		t.Helper()
		res, err := tb.admin.GetQueueConfig(ctx(t), connect.NewRequest(&conveyorv1.GetQueueConfigRequest{Queue: "hooks", Stored: true}))
		if err != nil {
			t.Fatalf("GetQueueConfig: %v", err)
		}
		return res.Msg
	}

	t.Run("set an endpoint", func(t *testing.T) {
		b.t = t
		b.open("/ui/queues/hooks")
		shown("Push endpoint", "none")
		b.do("edit", chromedp.Click(`#config-h + button`))
		b.do("wait for the form", chromedp.WaitVisible("#qc-pushUrl"))
		set(map[string]string{"#qc-pushUrl": endpoint, "#qc-pushConcurrency": "20", "#qc-pushTimeout": "2m"})
		save()
		b.waitText(`section[aria-labelledby="config-h"]`, "Configuration saved.")
		shown("Push endpoint", endpoint)
		shown("Push concurrency", "20")
		shown("Push timeout", "2m0s")
		c := stored()
		if p := c.GetPush(); p.GetUrl() != endpoint || p.GetConcurrency() != 20 || p.GetTimeout().AsDuration() != 2*time.Minute {
			t.Errorf("the server stored push endpoint %v, want %s, 20, 2m", p, endpoint)
		}
		if c.GetConcurrencyLimit() != 0 || c.GetMaxActive() != 0 || c.GetGroupPolicy().GetMaxDelay() != nil {
			t.Errorf("setting the push endpoint stored other settings: %v", c)
		}
	})

	t.Run("the form bounds concurrency and timeout", func(t *testing.T) {
		b.t = t
		b.do("edit", chromedp.Click(`#config-h + button`))
		b.do("wait for the form", chromedp.WaitVisible("#qc-pushUrl"))
		set(map[string]string{"#qc-pushConcurrency": "1001", "#qc-pushTimeout": "2h"})
		save()
		b.waitText("#qc-pushConcurrency-help", "Enter a whole number from 0 to 1000.")
		b.waitText("#qc-pushTimeout-help", "at most 1h0m0s")
		if p := stored().GetPush(); p.GetConcurrency() != 20 || p.GetTimeout().AsDuration() != 2*time.Minute {
			t.Errorf("a refused form changed the endpoint to %v", p)
		}
		b.do("cancel", chromedp.Click(`form[aria-label="Queue configuration"] button[type="button"]`))
	})

	t.Run("the server refuses a URL that is not loopback", func(t *testing.T) {
		b.t = t
		b.do("edit", chromedp.Click(`#config-h + button`))
		b.do("wait for the form", chromedp.WaitVisible("#qc-pushUrl"))
		set(map[string]string{"#qc-pushUrl": "https://hooks.example.com/conveyor"})
		save()
		b.waitText(`form[aria-label="Queue configuration"] .error`, "The configuration was not saved")
		b.waitText(`form[aria-label="Queue configuration"] .error`, "config.push.url")
		b.waitText(`form[aria-label="Queue configuration"] .error`, "is not a loopback URL")
		// The message quotes the URL: it wraps within its box.
		if eval[bool](b, "measure the error box", `(e => e.scrollWidth > e.clientWidth)(document.querySelector('form[aria-label="Queue configuration"] .error'))`) {
			t.Errorf("the server's message overflows its box")
		}
		if v := eval[string](b, "read the URL field's state", `document.querySelector("#qc-pushUrl").getAttribute("aria-invalid") ?? ""`); v != "true" {
			t.Errorf("the URL field the server refused is not marked invalid (aria-invalid %q)", v)
		}
		if u := stored().GetPush().GetUrl(); u != endpoint {
			t.Errorf("after the refusal the server has push URL %q, want %q", u, endpoint)
		}
	})

	t.Run("the endpoint on the workers page", func(t *testing.T) {
		b.t = t
		row := `tr[data-session="push:hooks"]`
		b.open("/ui/workers")
		b.waitText(row+` td[data-label="Labels"]`, "push="+endpoint)
		b.waitTextIs(row+` td[data-label="In flight"]`, "0/20")
		// A push endpoint has no session, so no heartbeat and no SDK:
		// neither is "yet" to come.
		b.waitTextIs(row+` td[data-label="Last heartbeat"]`, "—")
		b.waitTextIs(row+` td[data-label="SDK"]`, "—")
	})
}
