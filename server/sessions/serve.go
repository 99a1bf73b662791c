package sessions

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
	"github.com/conveyor-dev/conveyor/lease"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

// helloTimeout bounds how long a new stream may take to send its Hello, so
// a connection that never speaks cannot hold a goroutine forever.
const helloTimeout = 30 * time.Second

func protocolError(format string, args ...any) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf(format, args...))
}

// Serve runs one worker session on stream, the body of the
// WorkerService.Session handler: Hello, Welcome, then the send and
// receive loops until either side ends the stream. Whatever the reason it
// ends, every lease the session still holds is released. It returns once
// the session's goroutines are done with the stream, with the error the
// stream ends with (nil when the worker closed it).
func (h *Hub) Serve(ctx context.Context, stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]) error {
	hello, err := receiveHello(ctx, stream, h.closed)
	if err != nil {
		return err
	}
	if err := checkHello(hello, h.cfg.Version, h.cfg.MinSDKVersion); err != nil {
		return err
	}
	release, err := h.seeRelease(ctx, hello.GetReleaseId())
	if err != nil {
		return wire.ConnectError(h.log, err)
	}
	s := newSession(ctx, h, ulid.Make().String(), hello, h.cfg.MaxSessionConcurrency)
	s.rel = release
	if w, ok := h.broker.(broker.LeaseWarmer); ok {
		w.WarmLeases(ctx, s.route) // before the session is listed: its first tasks do not wait for it
	}
	if !h.register(s) {
		return errShuttingDown
	}
	defer h.unregister(s)
	h.warmNarrowed(s)
	err = stream.Send(&conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Welcome{Welcome: &conveyorv1.Welcome{
		SessionId:         s.id,
		LeaseTtl:          durationpb.New(h.cfg.LeaseTTL),
		HeartbeatInterval: durationpb.New(lease.HeartbeatInterval(h.cfg.LeaseTTL)),
		ServerVersion:     h.cfg.Version,
		MinSdkVersion:     h.cfg.MinSDKVersion,
	}}})
	if err != nil {
		return err
	}
	s.log.Info("worker session opened", "queues", hello.GetQueues(), "concurrency", hello.GetConcurrency(),
		"sdk_version", hello.GetSdkVersion(), "labels", hello.GetLabels(), "types", hello.GetTypes(),
		"release", hello.GetReleaseId(), "start_authorization", hello.GetStartAuthorization())
	if s.window < s.concurrency {
		s.log.Info("worker session throttled: it is sent at most max_session_concurrency tasks at once, fewer than it declared",
			"concurrency", s.concurrency, "max_session_concurrency", s.window)
	}

	h.wg.Add(3)
	go func() {
		defer h.wg.Done()
		s.completions.run()
	}()
	sendDone := make(chan struct{})
	go func() {
		defer h.wg.Done()
		s.end(s.receiveLoop(stream))
	}()
	go func() {
		// However the session ends (the worker's side, a protocol error,
		// server shutdown), a write it stays blocked in is cut: a worker
		// that stops reading but keeps its side open would otherwise keep
		// this handler, and a graceful Stop, waiting.
		defer h.wg.Done()
		select {
		case <-s.ctx.Done():
			cutStuckSend(s, sendDone)
		case <-sendDone:
		}
	}()
	err = s.sendLoop(stream)
	close(sendDone)
	s.end(err)
	// The receive loop (or the hub) may be the one ending the session:
	// end cancels only once the leases are released, so this returns, and
	// the stream ends, after they are, and after the Results that
	// arrived are recorded.
	<-s.ctx.Done()
	<-s.completions.done
	err = context.Cause(s.ctx)
	if errors.Is(err, errEndOfRequests) {
		s.log.Info("worker session closed by the worker")
		return nil
	}
	s.log.Info("worker session ended", "reason", err)
	return err
}

// receiveHello waits for the first frame, which must be a Hello. It gives
// up with errShuttingDown when closed is closed: the server is stopping.
func receiveHello(ctx context.Context, stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage],
	closed <-chan struct{}) (*conveyorv1.Hello, error) {
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
	case <-closed:
		return nil, errShuttingDown
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

// checkHello enforces every MUST of the protocol's Hello (§5.2), the
// version handshake (§8) and the server's bounds on a Hello. A concurrency
// above the server's per-session limit is not one of them: the protocol
// bounds it only from below, and lets a server send less (see newSession).
func checkHello(h *conveyorv1.Hello, serverVersion, minSDKVersion string) error {
	if len(h.GetQueues()) == 0 {
		return protocolError("hello.queues must contain at least one queue")
	}
	if err := checkHelloBounds(h); err != nil {
		return err
	}
	for name, weight := range h.GetQueues() {
		if !wire.ValidQueueName(name) {
			return protocolError("hello.queues: queue name %q is invalid: it must match ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$",
				wire.TruncateUTF8(name, wire.MaxEchoBytes))
		}
		if weight <= 0 {
			return protocolError("hello.queues[%q]: weight must be > 0, got %d", wire.TruncateUTF8(name, wire.MaxEchoBytes), weight)
		}
	}
	if h.GetConcurrency() <= 0 {
		return protocolError("hello.concurrency must be > 0, got %d", h.GetConcurrency())
	}
	if v, err := semver.NewVersion(h.GetSdkVersion()); err == nil {
		if v.LessThan(semver.MustParse(minSDKVersion)) {
			return protocolError("hello.sdk_version %s is older than the oldest SDK this server admits, %s",
				wire.TruncateUTF8(h.GetSdkVersion(), wire.MaxEchoBytes), minSDKVersion)
		}
	}
	if h.GetMinServerVersion() != "" {
		want, werr := semver.NewVersion(h.GetMinServerVersion())
		have, herr := semver.NewVersion(serverVersion)
		if werr == nil && herr == nil && have.LessThan(want) {
			return protocolError("this server is version %s; the worker requires at least %s (hello.min_server_version)",
				serverVersion, wire.TruncateUTF8(h.GetMinServerVersion(), wire.MaxEchoBytes))
		}
	}
	return nil
}

// sendCutGrace is how long the send loop may stay blocked in a write after
// its session ended (the worker stopped reading) before the write is cut.
// It bounds what a wedged worker adds to a graceful Stop.
const sendCutGrace = time.Second

// cutStuckSend cuts the session's pending write if the send loop has not
// returned within sendCutGrace of the session's end. The leases were
// released when the session ended; this frees the goroutine and the stream.
func cutStuckSend(s *session, sendDone <-chan struct{}) {
	t := time.NewTimer(sendCutGrace)
	defer t.Stop()
	select {
	case <-sendDone:
	case <-t.C:
		s.log.Info("the worker stopped reading: cutting the stream")
		s.gate.cutWrites()
	}
}

// checkHelloBounds enforces the size limits on a Hello's maps and strings.
// (The session's codec checked the counts on the encoded frame already;
// they are checked again here on what it decoded, by the same rule.)
func checkHelloBounds(h *conveyorv1.Hello) error {
	counts := frameCounts{queues: len(h.GetQueues()), labels: len(h.GetLabels()), batchTypes: len(h.GetBatchTypes()), types: len(h.GetTypes())}
	if err := counts.check(); err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	switch {
	case len(h.GetSdkVersion()) > wire.MaxLabelBytes || len(h.GetMinServerVersion()) > wire.MaxLabelBytes:
		return protocolError("hello.sdk_version and hello.min_server_version must be at most %d bytes", wire.MaxLabelBytes)
	}
	for name := range h.GetQueues() {
		if len(name) > wire.MaxNameBytes {
			return protocolError("hello.queues: a queue name is %d bytes; the limit is %d", len(name), wire.MaxNameBytes)
		}
	}
	for k, v := range h.GetLabels() {
		if len(k) > wire.MaxLabelBytes || len(v) > wire.MaxLabelBytes {
			return protocolError("hello.labels[%q]: keys and values must be at most %d bytes", wire.TruncateUTF8(k, wire.MaxEchoBytes), wire.MaxLabelBytes)
		}
	}
	for _, t := range h.GetBatchTypes() {
		if t == "" || len(t) > wire.MaxNameBytes {
			return protocolError("hello.batch_types: each type must be 1..%d bytes", wire.MaxNameBytes)
		}
	}
	for _, t := range h.GetTypes() {
		if t == "" || len(t) > wire.MaxNameBytes {
			return protocolError("hello.types: each type must be 1..%d bytes", wire.MaxNameBytes)
		}
	}
	if len(h.GetReleaseId()) > wire.MaxLabelBytes {
		return protocolError("hello.release_id is %d bytes; the limit is %d", len(h.GetReleaseId()), wire.MaxLabelBytes)
	}
	return nil
}
