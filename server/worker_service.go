package server

import (
	"context"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server/sessions"
)

// workerService implements conveyor.v1.WorkerService: its one RPC is a
// worker session, which server/sessions serves.
type workerService struct {
	conveyorv1connect.UnimplementedWorkerServiceHandler
	hub *sessions.Hub
}

// workerCodecs are the WorkerService handler's codecs (binary protobuf and
// the two JSON names), each bounding frames before decoding them.
var workerCodecs = sessions.Codecs(jsonCodec{name: "json"}, jsonCodec{name: "json; charset=utf-8"})

// Session runs one worker session (sessions.Hub.Serve).
func (w *workerService) Session(ctx context.Context, stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]) error {
	return w.hub.Serve(ctx, stream)
}
