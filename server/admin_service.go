package server

import (
	"context"
	"os"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// adminService implements conveyor.v1.AdminService: this file the
// cluster and broker; admin_workers.go the workers; admin_queues.go the queues and their
// configuration; admin_tasks.go listing and acting on tasks.
type adminService struct {
	conveyorv1connect.UnimplementedAdminServiceHandler
	broker broker.Broker
	server *Server
}

func (a *adminService) GetClusterInfo(ctx context.Context, _ *connect.Request[conveyorv1.GetClusterInfoRequest]) (*connect.Response[conveyorv1.GetClusterInfoResponse], error) {
	s := a.server
	info, err := a.broker.Info(ctx)
	if err != nil {
		return nil, wire.ConnectError(s.log, err)
	}
	nodes, err := a.nodes(ctx)
	if err != nil {
		return nil, wire.ConnectError(s.log, err)
	}
	return connect.NewResponse(&conveyorv1.GetClusterInfoResponse{
		Nodes:         nodes,
		Version:       s.cfg.Version,
		Uptime:        durationpb.New(s.now().Sub(s.started)),
		StorageEngine: info.Engine,
	}), nil
}

// nodes lists the live nodes: the engine's, for one several nodes share,
// else this one.
func (a *adminService) nodes(ctx context.Context) ([]*conveyorv1.NodeInfo, error) {
	s := a.server
	c, ok := a.broker.(broker.Clustered)
	if !ok {
		host, _ := os.Hostname()
		return []*conveyorv1.NodeInfo{{Id: host, Address: s.Addr().String(), Version: s.cfg.Version,
			StartedAt: timestamppb.New(s.started), Leader: true}}, nil
	}
	nodes, err := c.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*conveyorv1.NodeInfo, len(nodes))
	for i, n := range nodes {
		out[i] = &conveyorv1.NodeInfo{Id: n.ID, Address: n.Address, Version: n.Version, StartedAt: timestamppb.New(n.StartedAt),
			LastSeenAt: timestamppb.New(n.LastSeen), Leader: n.Leader}
	}
	return out, nil
}

func (a *adminService) GetBrokerInfo(ctx context.Context, _ *connect.Request[conveyorv1.GetBrokerInfoRequest]) (*connect.Response[conveyorv1.GetBrokerInfoResponse], error) {
	info, err := a.broker.Info(ctx)
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	counts := map[string]int64{}
	for s, n := range info.Counts {
		if st := broker.State(s); st.Valid() {
			counts[st.String()] = n
		}
	}
	res := &conveyorv1.GetBrokerInfoResponse{Engine: info.Engine, DataPath: info.DataPath, TaskCounts: counts}
	if fs, ok := a.broker.(broker.FileStater); ok {
		if st, err := fs.FileStats(); err == nil {
			res.FileSizeBytes, res.FreePages = st.SizeBytes, st.FreePages
		}
	}
	if ds, ok := a.broker.(broker.DatabaseStater); ok {
		st, err := ds.DatabaseStats(ctx)
		if err != nil {
			return nil, wire.ConnectError(a.server.log, err)
		}
		res.DatabaseSizeBytes, res.LiveTuples, res.DeadTuples = st.SizeBytes, st.LiveTuples, st.DeadTuples
	}
	return connect.NewResponse(res), nil
}
