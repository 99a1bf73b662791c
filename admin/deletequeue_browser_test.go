package admin_test

import (
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/chromedp/chromedp"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// TestDashboardDeleteQueue: the queues page offers Delete for a queue
// holding no task, asks first, and drops the row once the server forgot
// the queue; a refusal (a cron entry uses the queue) shows the server's
// message and keeps the row.
func TestDashboardDeleteQueue(t *testing.T) {
	tb := setup(t, "")
	for _, q := range []string{"empty", "ticks"} {
		if _, err := tb.admin.PauseQueue(ctx(t), connect.NewRequest(&conveyorv1.PauseQueueRequest{Queue: q})); err != nil {
			t.Fatalf("PauseQueue %s: %v", q, err)
		}
	}
	if _, err := tb.admin.CreateCron(ctx(t), connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: &conveyorv1.CronEntry{
		Id: "tick", Spec: "@every 1h", Queue: "ticks", Type: "tick"}})); err != nil {
		t.Fatalf("CreateCron: %v", err)
	}
	tb.enqueue(t, "busy", "job", 1)
	b := newBrowser(t, tb.url)
	b.open("/ui/")
	b.do("wait for the queues", chromedp.WaitVisible(`tr[data-queue="busy"]`), chromedp.WaitVisible(`tr[data-queue="empty"]`))

	deleteBtn := func(q string) string { return fmt.Sprintf(`tr[data-queue=%q] [data-action="delete-queue"]`, q) }
	if eval[bool](b, "look for Delete on a queue holding a task", fmt.Sprintf(`document.querySelector(%q) !== null`, deleteBtn("busy"))) {
		t.Errorf("a queue holding a task offers Delete")
	}
	confirm := func(q string) {
		b.do("ask to delete "+q, chromedp.Click(deleteBtn(q)))
		b.waitText(fmt.Sprintf(`tr[data-queue=%q] .confirm`, q), "Delete queue "+q+"?")
		b.do("confirm", chromedp.Click(fmt.Sprintf(`tr[data-queue=%q] .confirm button.danger`, q)))
	}

	confirm("ticks")
	b.waitText(`tr[data-queue="ticks"] [role="alert"]`, `cron entry "tick"`)

	confirm("empty")
	b.do("wait for the row to go", chromedp.Poll[chromedp.Void](`document.querySelector('tr[data-queue="empty"]') === null`,
		chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(stepTimeout)))
	res, err := tb.admin.ListQueues(ctx(t), connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, q := range res.Msg.GetQueues() {
		names = append(names, q.GetName())
	}
	if fmt.Sprint(names) != "[busy ticks]" {
		t.Errorf("the server lists %v after the delete, want [busy ticks]", names)
	}
}
