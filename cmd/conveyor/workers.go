package main

import (
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// workersCmd is `conveyor workers`: the live worker sessions.
type workersCmd struct {
	clientFlags
}

// Run lists the sessions by id: what each serves, how busy it is, and the
// tasks it holds (dispatched and not yet answered).
func (c *workersCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	res, err := cn.admin.ListWorkers(ctx, connect.NewRequest(&conveyorv1.ListWorkersRequest{}))
	if err != nil {
		return err
	}
	if c.JSON {
		return writeJSONList(k.Stdout, res.Msg.GetWorkers())
	}
	t := newTable(k.Stdout, "SESSION", "QUEUES", "CONCURRENCY", "IN FLIGHT", "SDK", "CONNECTED", "LAST HEARTBEAT", "LABELS", "TASKS")
	for _, w := range res.Msg.GetWorkers() {
		t.row(w.GetSessionId(), orDash(showMap(w.GetQueues())), fmt.Sprint(w.GetConcurrency()),
			fmt.Sprint(w.GetInFlight()), orDash(w.GetSdkVersion()), showTime(w.GetConnectedAt()),
			showTime(w.GetLastHeartbeatAt()), orDash(showMap(w.GetLabels())), orDash(strings.Join(w.GetTaskIds(), ",")))
	}
	return t.flush()
}
