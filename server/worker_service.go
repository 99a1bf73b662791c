package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"connectrpc.com/connect"
	"github.com/Masterminds/semver/v3"
	"github.com/oklog/ulid/v2"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/internal/buildinfo"
	"github.com/conveyor-dev/conveyor/lease"
)

// helloTimeout bounds how long a new stream may take to send its Hello, so
// a connection that never speaks cannot hold a goroutine forever.
const helloTimeout = 30 * time.Second

// workerService implements conveyor.v1.WorkerService.
type workerService struct {
	conveyorv1connect.UnimplementedWorkerServiceHandler
	hub *hub
}

func protocolError(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, args...))
}

// Session runs one worker session: Hello, Welcome, then the send and
// receive loops until either side ends the stream. Whatever the reason it
// ends, every lease the session still holds is released.
func (w *workerService) Session(ctx context.Context, stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]) error {
	h := w.hub
	hello, err := receiveHello(ctx, stream)
	if err != nil {
		return err
	}
	if err := checkHello(hello, h.cfg.Version); err != nil {
		return err
	}
	s := newSession(ctx, h, ulid.Make().String(), hello)
	if !h.register(s) {
		return errShuttingDown
	}
	defer h.unregister(s)
	err = stream.Send(&conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Welcome{Welcome: &conveyorv1.Welcome{
		SessionId:         s.id,
		LeaseTtl:          durationpb.New(h.cfg.LeaseTTL),
		HeartbeatInterval: durationpb.New(lease.HeartbeatInterval(h.cfg.LeaseTTL)),
		ServerVersion:     h.cfg.Version,
		MinSdkVersion:     buildinfo.MinSDKVersion,
	}}})
	if err != nil {
		return err
	}
	s.log.Info("worker session opened", "queues", hello.GetQueues(), "concurrency", hello.GetConcurrency(),
		"sdk_version", hello.GetSdkVersion(), "labels", hello.GetLabels())

	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		s.cancel(s.receiveLoop(stream))
	}()
	err = s.sendLoop(stream)
	s.cancel(err)
	err = context.Cause(s.ctx)
	if errors.Is(err, errEndOfRequests) {
		s.log.Info("worker session closed by the worker")
		return nil
	}
	s.log.Info("worker session ended", "reason", err)
	return err
}

// receiveHello waits for the first frame, which must be a Hello.
func receiveHello(ctx context.Context, stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]) (*conveyorv1.Hello, error) {
	type result struct {
		msg *conveyorv1.WorkerMessage
		err error
	}
	ch := make(chan result, 1)
	go func() {
		m, err := stream.Receive()
		ch <- result{m, err}
	}()
	timer := time.NewTimer(helloTimeout)
	defer timer.Stop()
	select {
	case r := <-ch:
		if errors.Is(r.err, io.EOF) {
			return nil, protocolError("the stream ended before its Hello frame")
		}
		if r.err != nil {
			return nil, r.err
		}
		hello := r.msg.GetHello()
		if hello == nil {
			return nil, protocolError("the first frame must be Hello, got %s", frameName(r.msg))
		}
		return hello, nil
	case <-timer.C:
		return nil, connect.NewError(connect.CodeDeadlineExceeded,
			fmt.Errorf("no Hello frame within %s of opening the stream", helloTimeout))
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// frameName is the protocol name of a frame ("heartbeat"), for messages.
func frameName(m *conveyorv1.WorkerMessage) string {
	oneof := m.ProtoReflect().Descriptor().Oneofs().ByName("frame")
	if f := m.ProtoReflect().WhichOneof(oneof); f != nil {
		return string(f.Name())
	}
	return "an empty frame"
}

// checkHello enforces every MUST of the protocol's Hello (§5.2) and the
// version handshake (§8).
func checkHello(h *conveyorv1.Hello, serverVersion string) error {
	if len(h.GetQueues()) == 0 {
		return protocolError("hello.queues must contain at least one queue")
	}
	for name, weight := range h.GetQueues() {
		if !validQueueName(name) {
			return protocolError("hello.queues: queue name %q is invalid: it must match ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$", name)
		}
		if weight <= 0 {
			return protocolError("hello.queues[%q]: weight must be > 0, got %d", name, weight)
		}
	}
	if h.GetConcurrency() <= 0 {
		return protocolError("hello.concurrency must be > 0, got %d", h.GetConcurrency())
	}
	if v, err := semver.NewVersion(h.GetSdkVersion()); err == nil {
		if v.LessThan(semver.MustParse(buildinfo.MinSDKVersion)) {
			return protocolError("hello.sdk_version %s is older than the oldest SDK this server admits, %s",
				h.GetSdkVersion(), buildinfo.MinSDKVersion)
		}
	}
	if h.GetMinServerVersion() != "" {
		want, werr := semver.NewVersion(h.GetMinServerVersion())
		have, herr := semver.NewVersion(serverVersion)
		if werr == nil && herr == nil && have.LessThan(want) {
			return protocolError("this server is version %s; the worker requires at least %s (hello.min_server_version)",
				serverVersion, h.GetMinServerVersion())
		}
	}
	return nil
}

// errEndOfRequests marks a worker closing its side of the stream: a clean
// end of the session.
var errEndOfRequests = errors.New("the worker closed the stream")

// receiveLoop handles every frame after Hello until the stream ends. It
// returns the reason the session must end.
func (s *session) receiveLoop(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]) error {
	for {
		msg, err := stream.Receive()
		if errors.Is(err, io.EOF) {
			return errEndOfRequests
		}
		if err != nil {
			return err
		}
		if err := s.handle(msg); err != nil {
			return err
		}
	}
}

// handle applies one worker frame. Only protocol violations return an
// error (ending this stream alone); frames about tasks the session does
// not hold are dropped.
func (s *session) handle(msg *conveyorv1.WorkerMessage) error {
	switch f := msg.GetFrame().(type) {
	case *conveyorv1.WorkerMessage_Result:
		return s.result(f.Result)
	case *conveyorv1.WorkerMessage_BatchResult:
		for _, r := range f.BatchResult.GetResults() {
			if err := s.result(r); err != nil {
				return err
			}
		}
	case *conveyorv1.WorkerMessage_Heartbeat:
		s.heartbeat(f.Heartbeat.GetActiveTaskIds())
	case *conveyorv1.WorkerMessage_Credit:
		n := f.Credit.GetN()
		if n <= 0 || int(n) > s.concurrency {
			return protocolError("credit.n must be 1..%d (the declared concurrency), got %d", s.concurrency, n)
		}
		s.wake()
	case *conveyorv1.WorkerMessage_Progress:
		s.progress(f.Progress)
	case *conveyorv1.WorkerMessage_Hello:
		return protocolError("hello may only be the first frame of a session")
	default:
		// An empty frame, or one this server does not know (a newer
		// worker): ignored, as unknown fields are.
	}
	return nil
}

func (s *session) result(r *conveyorv1.Result) error {
	if len(r.GetResult()) > MaxPayloadBytes {
		return protocolError("result.result for task %s is %d bytes; the limit is %d (1 MiB)",
			r.GetTaskId(), len(r.GetResult()), MaxPayloadBytes)
	}
	ref, ok := s.settle(r.GetTaskId())
	if !ok {
		return nil
	}
	outcome := r.GetOutcome()
	if _, known := conveyorv1.TaskOutcome_name[int32(outcome)]; !known {
		s.log.Warn("unknown outcome treated as RELEASED", "task", ref.TaskID, "outcome", int32(outcome))
		outcome = conveyorv1.TaskOutcome_TASK_OUTCOME_RELEASED
	}
	_, err := s.hub.broker.Complete(s.ctx, broker.CompleteParams{
		SessionID: s.id, Lease: ref, Outcome: outcome,
		ErrorMsg: r.GetErrorMsg(), Result: r.GetResult(), Now: s.hub.now(),
	})
	switch {
	case errors.Is(err, broker.ErrLeaseLost):
		s.hub.lateResults.Add(1)
		s.log.Info("dropped a result for a lease that was no longer current", "task", ref.TaskID)
	case err != nil:
		s.log.Error("record result", "task", ref.TaskID, "err", err)
	}
	s.wake()
	return nil
}

func (s *session) heartbeat(ids []string) {
	s.mu.Lock()
	s.lastHeartbeat = s.hub.now()
	s.pruneLapsedLocked(s.lastHeartbeat)
	s.mu.Unlock()
	refs := s.held(ids)
	if len(refs) == 0 {
		return
	}
	if _, err := s.hub.broker.Extend(s.ctx, broker.ExtendParams{
		SessionID: s.id, Leases: refs, Now: s.hub.now(), TTL: s.hub.cfg.LeaseTTL,
	}); err != nil {
		s.log.Warn("extend leases", "err", err)
	}
}

func (s *session) progress(p *conveyorv1.Progress) {
	refs := s.held([]string{p.GetTaskId()})
	if len(refs) == 0 {
		return
	}
	err := s.hub.broker.Progress(s.ctx, broker.ProgressParams{
		SessionID: s.id, Lease: refs[0], Percent: min(max(p.GetPercent(), 0), 100), Message: p.GetMessage(),
	})
	if err != nil && !errors.Is(err, broker.ErrLeaseLost) {
		s.log.Warn("record progress", "task", p.GetTaskId(), "err", err)
	}
}
