package admin_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// TestDashboardDependencyGraph drives a task page's dependency graph on a
// server with no worker: a small graph drawn whole with each task's state
// and a link to it; a long chain cut at five levels each way, and a wide
// fan-out cut at fifty tasks, each saying so. It also checks the times on
// a task page: relative, with the exact time on hover, and only the ones
// that mean something in the task's state.
func TestDashboardDependencyGraph(t *testing.T) {
	tb := setup(t, "")
	enqueue := func(typ string, opts ...conveyor.TaskOption) string {
		t.Helper()
		info, err := tb.client.Enqueue(ctx(t), typ, []byte(`{}`), append([]conveyor.TaskOption{conveyor.Queue("flow")}, opts...)...)
		if err != nil {
			t.Fatalf("Enqueue: %v", err)
		}
		return info.ID
	}
	// fetch ← render ← {upload, notify}
	fetch := enqueue("fetch")
	render := enqueue("render", conveyor.DependsOn(fetch))
	upload := enqueue("upload", conveyor.DependsOn(render))
	notify := enqueue("notify", conveyor.DependsOn(render))
	chain := []string{enqueue("step")}
	for range 7 {
		chain = append(chain, enqueue("step", conveyor.DependsOn(chain[len(chain)-1])))
	}
	hub := enqueue("hub")
	for range 55 {
		enqueue("leaf", conveyor.DependsOn(hub))
	}
	later := enqueue("later", conveyor.ProcessIn(2*time.Hour))

	b := newBrowser(t, tb.url)
	node := func(id string) string { return fmt.Sprintf(`svg.graph [data-node=%q]`, id) }
	nodes := func(want int) {
		t.Helper()
		b.do(fmt.Sprintf("wait for %d nodes", want), chromedp.Poll[chromedp.Void](
			fmt.Sprintf(`document.querySelectorAll("svg.graph [data-node]").length === %d`, want),
			chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
	}
	// An SVG element has no innerText: its text is its textContent.
	nodeText := func(id, want string) {
		t.Helper()
		b.do(fmt.Sprintf("wait for node %s to show %q", id, want), chromedp.Poll[chromedp.Void](
			fmt.Sprintf(`(document.querySelector(%q)?.textContent ?? "").includes(%q)`, node(id), want),
			chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
	}
	layer := func(id string) string {
		t.Helper()
		return eval[string](b, "read a node's layer", fmt.Sprintf(`document.querySelector(%q).dataset.layer`, node(id)))
	}

	t.Run("a small graph, whole", func(t *testing.T) {
		b.t = t
		b.open("/ui/tasks/" + render)
		nodes(4)
		nodeText(fetch, "Pending")
		nodeText(fetch, "fetch")
		nodeText(upload, "Blocked")
		nodeText(notify, "notify")
		for id, want := range map[string]string{fetch: "-1", render: "0", upload: "1", notify: "1"} {
			if got := layer(id); got != want {
				t.Errorf("task %s is on layer %s, want %s", id, got, want)
			}
		}
		if n := eval[int](b, "count the edges", `document.querySelectorAll("svg.graph .graph-edge").length`); n != 3 {
			t.Errorf("the graph has %d edges, want 3", n)
		}
		if n := eval[int](b, "look for a cut note", `document.querySelectorAll(".graph-cut").length`); n != 0 {
			t.Error("a whole graph says it was cut")
		}
		if screenshots() {
			b.do("scroll to the graph", chromedp.Evaluate[chromedp.Void](`document.querySelector("#deps-h").scrollIntoView()`))
		}
		b.screenshot("task-graph")
		b.do("open the prerequisite", chromedp.Click(node(fetch)))
		b.waitText("h1", "Task "+fetch)
		nodes(4)
		if got := layer(render); got != "1" {
			t.Errorf("from fetch, render is on layer %s, want 1", got)
		}
	})

	t.Run("a long chain, cut at five levels", func(t *testing.T) {
		b.t = t
		b.open("/ui/tasks/" + chain[0])
		nodes(6)
		b.waitText(".graph-cut", "more than 5 levels away are left out")
		if got := layer(chain[5]); got != "5" {
			t.Errorf("the fifth task down is on layer %s", got)
		}
		b.open("/ui/tasks/" + chain[7])
		nodes(6)
		if got := layer(chain[2]); got != "-5" {
			t.Errorf("the fifth task up is on layer %s", got)
		}
		b.waitText(".graph-cut", "left out")
		// From the middle, nothing is more than five levels away.
		b.open("/ui/tasks/" + chain[3])
		nodes(8)
		if n := eval[int](b, "look for a cut note", `document.querySelectorAll(".graph-cut").length`); n != 0 {
			t.Error("a graph drawn whole says it was cut")
		}
	})

	t.Run("a wide fan-out, cut at fifty tasks", func(t *testing.T) {
		b.t = t
		b.open("/ui/tasks/" + hub)
		nodes(50)
		b.waitText(".graph-cut", "Only 50 tasks are drawn")
	})

	t.Run("times are relative, exact on hover", func(t *testing.T) {
		b.t = t
		info, err := tb.client.GetTask(ctx(t), later)
		if err != nil {
			t.Fatalf("GetTask: %v", err)
		}
		b.open("/ui/tasks/" + later)
		b.waitText(".summary", "Runs")
		summary := func(label string) (text, title string) {
			t.Helper()
			v := eval[[]string](b, "read "+label, fmt.Sprintf(`(() => {
				const dt = [...document.querySelectorAll(".summary dt")].find(e => e.textContent === %q);
				const tm = dt && dt.nextElementSibling.querySelector("time");
				return tm ? [tm.textContent, tm.title] : [];
			})()`, label))
			if len(v) != 2 {
				t.Fatalf("the summary shows no time for %s\n%s", label, b.pageText())
			}
			return v[0], v[1]
		}
		text, title := summary("Enqueued")
		if !strings.HasSuffix(text, " ago") && text != "just now" {
			t.Errorf("Enqueued shows %q, want a relative time", text)
		}
		if want := info.EnqueuedAt.UTC().Format("2006-01-02T15:04:05"); !strings.Contains(title, want) {
			t.Errorf("Enqueued's title is %q, want the exact time %s", title, want)
		}
		text, title = summary("Runs")
		if text != "in 1 h" {
			t.Errorf("Runs shows %q, want in 1 h", text)
		}
		if want := info.NextProcessAt.UTC().Format("2006-01-02T15:04:05"); !strings.Contains(title, want) {
			t.Errorf("Runs' title is %q, want the exact time %s", title, want)
		}
	})

	t.Run("only the fields that mean something", func(t *testing.T) {
		b.t = t
		b.open("/ui/tasks/" + fetch)
		b.waitText(".page-head .badge", "Pending")
		b.waitText(".summary", "Enqueued")
		labels := eval[[]string](b, "read the summary's labels", `[...document.querySelectorAll(".summary dt")].map(e => e.textContent)`)
		for _, l := range labels {
			switch l {
			case "Runs", "Next attempt", "Started", "Last started", "Done":
				t.Errorf("a pending task's summary shows %q", l)
			}
		}
		for _, sel := range []string{"#prog-h", "#result-h"} {
			if n := eval[int](b, "look for "+sel, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)); n != 0 {
				t.Errorf("a pending task shows %s", sel)
			}
		}
	})
}
