package admin_test

// Worker sessions opened with the WorkerService client itself: a test
// picks each Hello field (types, release, start authorization) and holds a
// dispatched task as long as it likes, without a handler running.

import (
	"context"
	"errors"
	"io"
	"testing"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// rawSession is an open worker session and the frames the server sent it.
type rawSession struct {
	t      *testing.T
	id     string
	stream *connect.BidiStreamForClient[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]
	frames chan *conveyorv1.ServerMessage
	end    chan error
}

// openSession opens a session with hello and waits for its Welcome. The
// session ends at cleanup if the test has not closed it.
func (b *testBundle) openSession(t *testing.T, hello *conveyorv1.Hello) *rawSession {
	t.Helper()
	hc := servertest.HTTPClient()
	t.Cleanup(hc.CloseIdleConnections)
	opts := []connect.ClientOption{connect.WithGRPC()}
	if b.token != "" {
		opts = append(opts, servertest.BearerToken(b.token))
	}
	sctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream := conveyorv1connect.NewWorkerServiceClient(hc, b.url, opts...).Session(sctx)
	s := &rawSession{t: t, stream: stream, frames: make(chan *conveyorv1.ServerMessage, 64), end: make(chan error, 1)}
	s.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Hello{Hello: hello}})
	go func() {
		for {
			m, err := stream.Receive()
			if err != nil {
				s.end <- err
				close(s.frames)
				return
			}
			s.frames <- m
		}
	}()
	w := s.next().GetWelcome()
	if w == nil {
		t.Fatal("the first frame of the session is not a Welcome")
	}
	s.id = w.GetSessionId()
	return s
}

func (s *rawSession) send(m *conveyorv1.WorkerMessage) {
	s.t.Helper()
	if err := s.stream.Send(m); err != nil {
		s.t.Fatalf("send %T: %v", m.GetFrame(), err)
	}
}

// next is the next frame the server sent, within stepTimeout.
func (s *rawSession) next() *conveyorv1.ServerMessage {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), stepTimeout)
	defer cancel()
	select {
	case m, ok := <-s.frames:
		if !ok {
			s.t.Fatalf("the session ended: %v", <-s.end)
		}
		return m
	case <-ctx.Done():
		s.t.Fatalf("no frame from the server within %s", stepTimeout)
	}
	return nil
}

// nextDispatch is the next Dispatch, other frames skipped.
func (s *rawSession) nextDispatch() *conveyorv1.Dispatch {
	s.t.Helper()
	for {
		if d := s.next().GetDispatch(); d != nil {
			return d
		}
	}
}

// start asks to start the attempt and returns the server's decision.
func (s *rawSession) start(attemptID string) *conveyorv1.StartDecision {
	s.t.Helper()
	s.send(&conveyorv1.WorkerMessage{Frame: &conveyorv1.WorkerMessage_Start{Start: &conveyorv1.Start{AttemptId: attemptID}}})
	for {
		if d := s.next().GetStartDecision(); d != nil {
			return d
		}
	}
}

// close ends the session from the worker's side, as a worker that exits
// does, and waits for the server to end the stream.
func (s *rawSession) close() {
	s.t.Helper()
	if err := s.stream.CloseRequest(); err != nil {
		s.t.Fatal(err)
	}
	for range s.frames {
	}
	if err := <-s.end; !errors.Is(err, io.EOF) {
		s.t.Fatalf("the session ended with %v, want the server's end of stream", err)
	}
}
