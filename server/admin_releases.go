package server

import (
	"context"
	"errors"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// DrainRelease stops new work going to a release's sessions.
func (a *adminService) DrainRelease(ctx context.Context, req *connect.Request[conveyorv1.DrainReleaseRequest]) (*connect.Response[conveyorv1.DrainReleaseResponse], error) {
	id := req.Msg.GetReleaseId()
	if id == "" || len(id) > wire.MaxLabelBytes {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("release_id is required (at most 1024 bytes)"))
	}
	if err := a.server.hub.Drain(ctx, id); err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	a.server.log.Info("release drained", "release", id)
	return connect.NewResponse(&conveyorv1.DrainReleaseResponse{}), nil
}

// ListReleases lists the releases seen, the newest first.
func (a *adminService) ListReleases(ctx context.Context, _ *connect.Request[conveyorv1.ListReleasesRequest]) (*connect.Response[conveyorv1.ListReleasesResponse], error) {
	rs, err := a.server.hub.Releases(ctx)
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	out := &conveyorv1.ListReleasesResponse{}
	for _, r := range rs {
		out.Releases = append(out.Releases, &conveyorv1.ReleaseInfo{ReleaseId: r.ID, FirstSeenAt: timestamppb.New(r.FirstSeen),
			Draining: r.Draining, Sessions: int32(r.Sessions)})
	}
	return connect.NewResponse(out), nil
}
