package main

import (
	"fmt"
	"slices"
	"strings"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// workersCmd is `conveyor workers`: the live worker sessions.
type workersCmd struct {
	clientFlags
}

// Run lists the sessions by id (of every node, when several share a
// database, with the node each is on): what each serves, how busy it is,
// and the tasks it holds (dispatched and not yet answered).
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
	workers := res.Msg.GetWorkers()
	if len(workers) == 0 {
		return writef(k.Stdout, "no workers connected\n")
	}
	// The NODE column shows only when the server is one of several nodes
	// (a shared database): one node alone has nothing to tell apart.
	nodes := slices.ContainsFunc(workers, func(w *conveyorv1.WorkerInfo) bool { return w.GetNodeId() != "" })
	headers := []string{"SESSION", "QUEUES", "TYPES", "RELEASE", "CONCURRENCY", "IN FLIGHT", "SDK", "CONNECTED", "LAST HEARTBEAT", "LABELS", "TASKS"}
	if nodes {
		headers = slices.Insert(headers, 1, "NODE")
	}
	t := newTable(k.Stdout, headers...)
	for _, w := range workers {
		cells := []string{w.GetSessionId(), orDash(showMap(w.GetQueues())), showTypes(w.GetTypes()), showRelease(w),
			fmt.Sprint(w.GetConcurrency()),
			fmt.Sprint(w.GetInFlight()), orDash(w.GetSdkVersion()), showAgo(w.GetConnectedAt()),
			showAgo(w.GetLastHeartbeatAt()), orDash(showMap(w.GetLabels())), orDash(strings.Join(w.GetTaskIds(), ","))}
		if nodes {
			cells = slices.Insert(cells, 1, orDash(w.GetNodeId()))
		}
		t.row(cells...)
	}
	return t.flush()
}

// showTypes is a worker's types: "*" for every type.
func showTypes(types []string) string {
	if len(types) == 0 {
		return "*"
	}
	return strings.Join(types, ",")
}

// showRelease is a worker's release, and whether it is drained.
func showRelease(w *conveyorv1.WorkerInfo) string {
	r := orDash(w.GetReleaseId())
	if w.GetDraining() {
		r += " (draining)"
	}
	return r
}
