package main

import (
	"encoding/json"
	"fmt"
	"time"

	"connectrpc.com/connect"
	"github.com/alecthomas/kong"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// infoCmd is `conveyor info`: the server (GetClusterInfo) and its storage
// (GetBrokerInfo) in one view.
type infoCmd struct {
	clientFlags
}

// Run prints both answers: a listing, or with --json one object holding
// each under "cluster" and "broker".
func (c *infoCmd) Run(k *kong.Context) error {
	cn, err := c.dial()
	if err != nil {
		return err
	}
	ctx, cancel := callContext()
	defer cancel()
	cluster, err := cn.admin.GetClusterInfo(ctx, connect.NewRequest(&conveyorv1.GetClusterInfoRequest{}))
	if err != nil {
		return err
	}
	broker, err := cn.admin.GetBrokerInfo(ctx, connect.NewRequest(&conveyorv1.GetBrokerInfoRequest{}))
	if err != nil {
		return err
	}
	ci, bi := cluster.Msg, broker.Msg
	if c.JSON {
		cj, err := protoJSON(ci)
		if err != nil {
			return err
		}
		bj, err := protoJSON(bi)
		if err != nil {
			return err
		}
		return writeJSONValue(k.Stdout, struct {
			Cluster json.RawMessage `json:"cluster"`
			Broker  json.RawMessage `json:"broker"`
		}{cj, bj})
	}
	var l listing
	l.add("version", ci.GetVersion())
	l.add("uptime", ci.GetUptime().AsDuration().Round(time.Second).String())
	l.add("storage_engine", ci.GetStorageEngine())
	for _, n := range ci.GetNodes() {
		l.add("node", nodeLine(n))
	}
	l.add("data_path", bi.GetDataPath())
	if bi.GetEngine() == "postgres" {
		l.add("database_size", showSize(bi.GetDatabaseSizeBytes()))
		l.add("live_rows", fmt.Sprint(bi.GetLiveTuples()))
		l.add("dead_rows", fmt.Sprint(bi.GetDeadTuples()))
	} else {
		l.add("file_size", showSize(bi.GetFileSizeBytes()))
		l.add("free_pages", fmt.Sprint(bi.GetFreePages()))
	}
	for _, s := range stateNames { // every state, zero or not, in their order
		l.add("tasks."+s, fmt.Sprint(bi.GetTaskCounts()[s]))
	}
	return l.write(k.Stdout)
}

// nodeLine describes a node; one of several on a database also says when
// it was last seen and whether it leads.
func nodeLine(n *conveyorv1.NodeInfo) string {
	line := fmt.Sprintf("%s at %s, version %s, started %s", n.GetId(), n.GetAddress(), n.GetVersion(), showTime(n.GetStartedAt()))
	if n.GetLastSeenAt() == nil {
		return line
	}
	line += ", last seen " + showTime(n.GetLastSeenAt())
	if n.GetLeader() {
		line += ", leader"
	}
	return line
}
