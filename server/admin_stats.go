package server

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// GetQueueStats answers a queue's latency from the engine and its wait
// and run durations from this node's metrics.
func (a *adminService) GetQueueStats(ctx context.Context, req *connect.Request[conveyorv1.GetQueueStatsRequest]) (*connect.Response[conveyorv1.GetQueueStatsResponse], error) {
	queue := req.Msg.GetQueue()
	if err := checkQueueName("queue", queue); err != nil {
		return nil, err
	}
	if _, err := a.liveCounters(ctx, queue); err != nil {
		return nil, err // unknown: not_found
	}
	lr, ok := a.broker.(broker.LatencyReporter)
	if !ok {
		return nil, connect.NewError(connect.CodeUnimplemented, errors.New("this server's engine cannot tell a queue's latency"))
	}
	now := a.server.now()
	oldest, err := lr.OldestReady(ctx, queue, now)
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	out := &conveyorv1.GetQueueStatsResponse{Latency: durationpb.New(0), ObservedSince: timestamppb.New(a.server.started)}
	if !oldest.IsZero() {
		out.OldestReadyAt = timestamppb.New(oldest)
		out.Latency = durationpb.New(max(now.Sub(oldest), 0))
	}
	m := a.server.metrics
	label := m.queueLabel(queue)
	if label != queue {
		return connect.NewResponse(out), nil // lumped with other queues past the bound: nothing of its own
	}
	for _, h := range histograms(m.wait, label) {
		out.Wait = durationsOf(h.hist)
	}
	for _, h := range histograms(m.run, label) {
		out.Types = append(out.Types, &conveyorv1.TypeStats{Type: h.typ, Run: durationsOf(h.hist)})
	}
	slices.SortFunc(out.Types, func(x, y *conveyorv1.TypeStats) int { return strings.Compare(x.GetType(), y.GetType()) })
	return connect.NewResponse(out), nil
}

type labeledHistogram struct {
	typ  string
	hist *dto.Histogram
}

// histograms reads vec's series of one queue label.
func histograms(vec *prometheus.HistogramVec, queue string) []labeledHistogram {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		vec.Collect(ch)
		close(ch)
	}()
	var out []labeledHistogram
	for metric := range ch {
		var d dto.Metric
		if err := metric.Write(&d); err != nil || d.GetHistogram() == nil {
			continue
		}
		h := labeledHistogram{hist: d.GetHistogram()}
		mine := false
		for _, l := range d.GetLabel() {
			switch l.GetName() {
			case "queue":
				mine = l.GetValue() == queue
			case "type":
				h.typ = l.GetValue()
			}
		}
		if mine {
			out = append(out, h)
		}
	}
	return out
}

func durationsOf(h *dto.Histogram) *conveyorv1.Durations {
	return &conveyorv1.Durations{Count: int64(h.GetSampleCount()),
		P50: durationpb.New(quantile(0.5, h)), P95: durationpb.New(quantile(0.95, h))}
}

// quantile estimates the q-quantile of a histogram as Prometheus's
// histogram_quantile does: linearly within the bucket that holds it (from
// 0 for the first); one past the last finite bound is that bound.
func quantile(q float64, h *dto.Histogram) time.Duration {
	total := float64(h.GetSampleCount())
	if total == 0 {
		return 0
	}
	rank := q * total
	lower, below := 0.0, 0.0
	for _, b := range h.GetBucket() {
		upper, count := b.GetUpperBound(), float64(b.GetCumulativeCount())
		if count >= rank {
			if math.IsInf(upper, 1) {
				return seconds(lower)
			}
			if count == below {
				return seconds(upper)
			}
			return seconds(lower + (upper-lower)*(rank-below)/(count-below))
		}
		lower, below = upper, count
	}
	return seconds(lower)
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
