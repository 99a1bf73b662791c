package server

import (
	"context"
	"sort"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
	"github.com/conveyor-dev/conveyor/server/push"
	"github.com/conveyor-dev/conveyor/server/sessions"
)

// ListWorkers lists the live worker sessions, and the push endpoints
// (each as one worker) this node invokes, or on several nodes the leader. On an engine several nodes
// share (a session registry), it lists every node's: this node's from
// memory, so that their in-flight counts and tasks are exact, the others'
// as their nodes last wrote them (in-flight counts and heartbeats every
// few seconds, server/sessions' registry writer; their tasks as the
// database holds them now).
func (a *adminService) ListWorkers(ctx context.Context, _ *connect.Request[conveyorv1.ListWorkersRequest]) (*connect.Response[conveyorv1.ListWorkersResponse], error) {
	local := a.server.hub.List()
	node := nodeID(a.broker)
	out := &conveyorv1.ListWorkersResponse{Workers: make([]*conveyorv1.WorkerInfo, 0, len(local))}
	here := make(map[string]struct{}, len(local))
	for _, s := range local {
		here[s.ID] = struct{}{}
		out.Workers = append(out.Workers, localWorker(s, node))
	}
	if a.server.push.Pushing() { // another node's consumers stand idle: the leader's are listed from the registry
		for _, e := range a.server.push.List() {
			out.Workers = append(out.Workers, pushWorker(e, node))
		}
	}
	reg, ok := a.broker.(broker.SessionRegistry)
	if !ok {
		sortWorkers(out.Workers)
		return connect.NewResponse(out), nil
	}
	recorded, err := reg.Sessions(ctx)
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	for _, r := range recorded {
		if _, ok := here[r.ID]; ok || r.Node == node {
			continue // this node's: live ones listed above, the others ended (their close not written yet)
		}
		w := recordedWorker(r)
		w.Draining = r.ReleaseID != "" && a.server.hub.Draining(r.ReleaseID)
		out.Workers = append(out.Workers, w)
	}
	sortWorkers(out.Workers)
	return connect.NewResponse(out), nil
}

func sortWorkers(ws []*conveyorv1.WorkerInfo) {
	sort.Slice(ws, func(i, j int) bool { return ws[i].GetSessionId() < ws[j].GetSessionId() })
}

// pushWorker describes a queue's push endpoint as a worker: its
// labels["push"] is its URL, and labels["push_gone"] is set while it is
// sent nothing because it answered 410 Gone.
func pushWorker(e push.Info, node string) *conveyorv1.WorkerInfo {
	labels := map[string]string{"push": e.URL}
	if e.Gone {
		labels["push_gone"] = "410"
	}
	return &conveyorv1.WorkerInfo{
		SessionId:   e.SessionID,
		NodeId:      node,
		Queues:      map[string]int32{e.Queue: 1},
		Concurrency: int32(e.Concurrency),
		InFlight:    int32(e.InFlight),
		TaskIds:     e.TaskIDs,
		Labels:      labels,
		ConnectedAt: timestamppb.New(e.Started),
	}
}

// localWorker describes a session of this node.
func localWorker(s sessions.Info, node string) *conveyorv1.WorkerInfo {
	return &conveyorv1.WorkerInfo{
		SessionId:          s.ID,
		NodeId:             node,
		Queues:             s.Hello.GetQueues(),
		Concurrency:        s.Hello.GetConcurrency(),
		InFlight:           int32(s.InFlight),
		TaskIds:            s.TaskIDs,
		BatchTypes:         s.Hello.GetBatchTypes(),
		Types:              s.Hello.GetTypes(),
		ReleaseId:          s.Hello.GetReleaseId(),
		StartAuthorization: s.Hello.GetStartAuthorization(),
		Draining:           s.Draining,
		Labels:             s.Hello.GetLabels(),
		SdkVersion:         s.Hello.GetSdkVersion(),
		ConnectedAt:        timestamppb.New(s.ConnectedAt),
		LastHeartbeatAt:    ts(s.LastHeartbeat),
	}
}

// recordedWorker describes a session of another node, from the registry.
func recordedWorker(r broker.SessionInfo) *conveyorv1.WorkerInfo {
	return &conveyorv1.WorkerInfo{
		SessionId:          r.ID,
		NodeId:             r.Node,
		Queues:             r.Queues,
		Concurrency:        r.Concurrency,
		InFlight:           r.InFlight,
		TaskIds:            r.TaskIDs,
		BatchTypes:         r.BatchTypes,
		Types:              r.Types,
		ReleaseId:          r.ReleaseID,
		StartAuthorization: r.StartAuthorization,
		Labels:             r.Labels,
		SdkVersion:         r.SDKVersion,
		ConnectedAt:        timestamppb.New(r.ConnectedAt),
		LastHeartbeatAt:    ts(r.LastHeartbeat),
	}
}
