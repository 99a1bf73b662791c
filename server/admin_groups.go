package server

import (
	"context"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

func (a *adminService) ListGroups(ctx context.Context, req *connect.Request[conveyorv1.ListGroupsRequest]) (*connect.Response[conveyorv1.ListGroupsResponse], error) {
	q := req.Msg.GetQueue()
	if q != "" {
		if err := checkQueueName("queue", q); err != nil {
			return nil, err
		}
	}
	gs, err := a.broker.Groups(ctx, q)
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	out := &conveyorv1.ListGroupsResponse{}
	for _, g := range gs {
		out.Groups = append(out.Groups, &conveyorv1.GroupInfo{Queue: g.Queue, Group: g.Group, Type: g.Type,
			Size: int32(min(g.Size, 1<<31-1)), FirstEnqueuedAt: ts(g.First), LastEnqueuedAt: ts(g.Last), FiresAt: ts(g.FiresAt)})
	}
	return connect.NewResponse(out), nil
}
