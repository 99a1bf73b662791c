package server

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// GetQueueHistory turns the engine's history samples and the queues'
// counters now into one point per minute or day.
func (a *adminService) GetQueueHistory(ctx context.Context, req *connect.Request[conveyorv1.GetQueueHistoryRequest]) (*connect.Response[conveyorv1.GetQueueHistoryResponse], error) {
	queue := req.Msg.GetQueue()
	if queue != "" {
		if err := checkQueueName("queue", queue); err != nil {
			return nil, err
		}
	}
	res, err := historyResolution(req.Msg.GetResolution())
	if err != nil {
		return nil, err
	}
	h, ok := a.broker.(broker.HistoryKeeper)
	if !ok {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this server's engine keeps no queue history"))
	}
	live, err := a.liveCounters(ctx, queue)
	if err != nil {
		return nil, err
	}
	now := a.server.now()
	samples, err := h.History(ctx, res, queue, res.KeepFrom(now))
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	byQueue := map[string][]broker.HistorySample{}
	for _, s := range samples {
		byQueue[s.Queue] = append(byQueue[s.Queue], s)
	}
	series := make([][]broker.HistoryPoint, 0, len(live))
	for _, c := range live {
		series = append(series, broker.HistoryPoints(res, byQueue[c.Queue], c, now))
	}
	out := &conveyorv1.GetQueueHistoryResponse{}
	for _, p := range broker.SumHistory(res, series...) {
		out.Points = append(out.Points, &conveyorv1.HistoryPoint{Start: timestamppb.New(p.Bucket),
			Enqueued: p.Enqueued, Completed: p.Completed, Failed: p.Failed})
	}
	return connect.NewResponse(out), nil
}

// liveCounters are the counters now of one queue, or of every queue when
// queue is empty; an unknown queue is not_found.
func (a *adminService) liveCounters(ctx context.Context, queue string) ([]broker.HistoryCounters, error) {
	qs, err := a.broker.Queues(ctx)
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	var out []broker.HistoryCounters
	for _, q := range qs {
		if queue == "" || q.Name == queue {
			out = append(out, broker.HistoryCounters{Queue: q.Name, Enqueued: q.Enqueued, Processed: q.Processed, Failed: q.Failed})
		}
	}
	if queue != "" && len(out) == 0 {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("queue %q is unknown: no task was ever enqueued into it and it was never configured", queue))
	}
	return out, nil
}

func historyResolution(r conveyorv1.HistoryResolution) (broker.HistoryResolution, error) {
	switch r {
	case conveyorv1.HistoryResolution_HISTORY_RESOLUTION_UNSPECIFIED, conveyorv1.HistoryResolution_HISTORY_RESOLUTION_MINUTE:
		return broker.HistoryMinute, nil
	case conveyorv1.HistoryResolution_HISTORY_RESOLUTION_DAY:
		return broker.HistoryDay, nil
	}
	return 0, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("resolution %d is unknown: use HISTORY_RESOLUTION_MINUTE or HISTORY_RESOLUTION_DAY", r))
}
