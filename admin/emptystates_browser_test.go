package admin_test

import (
	"strings"
	"testing"
)

// TestDashboardEmptyStates: a server with nothing on it says on each page
// what to do next, with the command to copy, aimed at this server (its
// address set in CONVEYOR_ADDR, the test server not being on the default
// one) and never holding the token.
func TestDashboardEmptyStates(t *testing.T) {
	tb := setup(t, "")
	b := newBrowser(t, tb.url)
	addr := "CONVEYOR_ADDR=" + tb.url + " "
	for _, c := range []struct{ page, says, cmd string }{
		{"/ui/", "No queues yet", addr + `conveyor enqueue email:send '{"to":"a@b.c"}'`},
		{"/ui/workers", "No worker is connected", addr + "go run ./sdks/go/examples/worker"},
		{"/ui/crons", "No cron entries", addr + `conveyor cron create '@hourly' report:build '{}'`},
		{"/ui/groups", "No group is waiting", addr + `conveyor enqueue digest '{}' --group batch-1`},
	} {
		t.Run(strings.TrimPrefix(c.page, "/ui/"), func(t *testing.T) {
			b.t = t
			b.open(c.page)
			b.waitText(".empty", c.says)
			b.waitTextIs(".empty .command code", c.cmd)
			if label := b.attr(".empty .command button", "aria-label"); label != "Copy the command: "+c.cmd {
				t.Errorf("the copy button is labelled %q", label)
			}
		})
	}
}
