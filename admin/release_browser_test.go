package admin_test

import (
	"fmt"
	"testing"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// TestDashboardReleases: the workers page shows each session's types
// (or "all types"), release and start authorization, and lists the
// releases newest first; draining one there asks first, marks it and its
// workers, and the server then says it drains. A queue holding a ready
// task of a type no live session takes says so, on its page and in the
// queues list; a queue whose tasks are all served says nothing.
func TestDashboardReleases(t *testing.T) {
	tb := setup(t, "")
	v1 := tb.openSession(t, &conveyorv1.Hello{Queues: map[string]int32{"billing": 1}, Concurrency: 2, SdkVersion: "test",
		ReleaseId: "v1", Types: []string{"invoice:charge", "invoice:refund"}})
	v2 := tb.openSession(t, &conveyorv1.Hello{Queues: map[string]int32{"billing": 1}, Concurrency: 2, SdkVersion: "test",
		ReleaseId: "v2", Types: []string{"invoice:charge"}, StartAuthorization: true})
	all := tb.openSession(t, &conveyorv1.Hello{Queues: map[string]int32{"media": 1}, Concurrency: 1, SdkVersion: "test"})
	// Nothing takes invoice:void. The untyped session takes image:resize:
	// it holds one (never answered) and the other waits for its slot.
	tb.enqueue(t, "billing", "invoice:void", 2)
	tb.enqueue(t, "media", "image:resize", 2)
	all.nextDispatch()
	b := newBrowser(t, tb.url)
	row := func(s *rawSession) string { return fmt.Sprintf(`tr[data-session=%q]`, s.id) }

	t.Run("the workers show their types and releases", func(t *testing.T) {
		b.t = t
		b.open("/ui/workers")
		b.waitTextIs(row(v1)+" .types", "types: invoice:charge, invoice:refund")
		b.waitTextIs(row(v1)+" .release", "release v1")
		b.waitTextIs(row(v2)+" .types", "types: invoice:charge")
		b.waitTextIs(row(v2)+" .authorizes", "asks before starting at-most-once tasks")
		b.waitTextIs(row(v2)+" .release", "release v2")
		b.waitTextIs(row(all)+" .types", "all types")
		b.waitTextIs(row(all)+" .release", "unversioned")
		for _, s := range []*rawSession{v1, all} {
			if n := eval[int](b, "look for start authorization", fmt.Sprintf(`document.querySelectorAll('%s .authorizes').length`, row(s))); n != 0 {
				t.Errorf("session %s, which does not ask before it starts a task, is said to", s.id)
			}
		}
		b.waitTextIs(`tr[data-release="v1"] td[data-label="Sessions"]`, "1")
		got := eval[string](b, "read the releases' order", `[...document.querySelectorAll("tr[data-release]")].map((r) => r.dataset.release).join(",")`)
		if got != "v2,v1" {
			t.Errorf("the releases are listed %s, want the newest first: v2,v1", got)
		}
	})

	t.Run("drain a release", func(t *testing.T) {
		b.t = t
		b.do("ask to drain v1", chromedp.Click(`tr[data-release="v1"] [data-action="drain-release"]`))
		b.waitText(`tr[data-release="v1"] .confirm`, "Drain release v1?")
		if drained(t, tb)["v1"] {
			t.Fatal("v1 drains before the drain was confirmed")
		}
		b.do("confirm", chromedp.Click(`tr[data-release="v1"] .confirm button.danger`))
		b.waitText(`section[aria-labelledby="releases-h"] .notice-ok`, "Release v1 drained")
		b.waitTextIs(`tr[data-release="v1"] td[data-label="Status"]`, "Draining")
		b.waitTextIs(`tr[data-release="v2"] td[data-label="Status"]`, "Active")
		b.waitTextIs(row(v1)+" .release", "release v1 Draining")
		if got := drained(t, tb); !got["v1"] || got["v2"] {
			t.Errorf("after the drain ListReleases says draining %v, want v1 only", got)
		}
		if n := eval[int](b, "count Drain buttons", `document.querySelectorAll('tr[data-release="v1"] [data-action="drain-release"]').length`); n != 0 {
			t.Errorf("a drained release still offers Drain")
		}
		b.waitTextIs(row(v2)+" .release", "release v2")
	})

	t.Run("a type no worker takes", func(t *testing.T) {
		b.t = t
		b.open("/ui/queues/billing")
		b.waitTextIs(".warning.unserved p", "No live worker takes these types: invoice:void — their tasks wait.")
		b.do("follow the type to its tasks", chromedp.Click(`.warning.unserved a`))
		b.waitText("h1", "Tasks")
		if q := eval[string](b, "read the URL", `location.search`); q != "?queue=billing&state=pending&type=invoice%3Avoid" {
			t.Errorf("the type links to %s", q)
		}
		b.open("/ui/")
		b.waitTextIs(`tr[data-queue="billing"] .badge.unserved`, "Unserved")
		if l := eval[string](b, "read the mark's name", `document.querySelector('tr[data-queue="billing"] .badge.unserved').getAttribute("aria-label")`); l != "No live worker takes invoice:void in billing" {
			t.Errorf("the mark on billing is named %q", l)
		}
		b.waitTextIs(`tr[data-queue="media"] td[data-state="active"]`, "1")
		b.waitTextIs(`tr[data-queue="media"] td[data-state="pending"]`, "1")
		if n := eval[int](b, "look for a mark on media", `document.querySelectorAll('tr[data-queue="media"] .unserved').length`); n != 0 {
			t.Errorf("the queue media, whose tasks are all served, is marked unserved")
		}
	})
}

// drained is which releases ListReleases says drain.
func drained(t *testing.T, tb *testBundle) map[string]bool {
	t.Helper()
	res, err := tb.admin.ListReleases(ctx(t), connect.NewRequest(&conveyorv1.ListReleasesRequest{}))
	if err != nil {
		t.Fatalf("ListReleases: %v", err)
	}
	out := map[string]bool{}
	for _, r := range res.Msg.GetReleases() {
		out[r.GetReleaseId()] = r.GetDraining()
	}
	return out
}
