package conformance

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
)

// Fake is a WorkerService that the tests script: it records every session
// attempt, Hello and frame with its time, refuses sessions on demand, and
// sends what a test tells it to, including what a real server never would.
type Fake struct {
	conveyorv1connect.UnimplementedWorkerServiceHandler

	// URL is the fake's base URL (h2c).
	URL string
	// LeaseTTL and HeartbeatInterval go in every Welcome.
	LeaseTTL, HeartbeatInterval time.Duration
	// refuse, when set, is asked before each session (n counts attempts
	// from 0); a non-nil error refuses that session with it.
	refuse func(n int) error
	// welcomeDelay holds each Welcome back this long after the Hello.
	welcomeDelay time.Duration

	mu       sync.Mutex
	attempts []time.Time
	sessions []*FakeSession
	problems []string
}

// FakeSession is one accepted session.
type FakeSession struct {
	ID    string
	Hello *conveyorv1.Hello
	// welcomed is when the Welcome was sent.
	welcomed time.Time

	send      chan *conveyorv1.ServerMessage
	cut       chan error
	reqClosed chan struct{}
	ended     chan struct{}

	mu     sync.Mutex
	frames []Frame
}

// Frame is one frame the worker sent, with when it arrived.
type Frame struct {
	At  time.Time
	Msg *conveyorv1.WorkerMessage
}

// FakeOption configures a Fake.
type FakeOption func(*Fake)

// WelcomeDelay holds each Welcome back d after the Hello, so that a test
// sees whether the worker waits for it.
func WelcomeDelay(d time.Duration) FakeOption { return func(f *Fake) { f.welcomeDelay = d } }

// StartFake starts a Fake on a loopback h2c server, closed at cleanup.
// refuse, if not nil, is asked before each session attempt (n counts them
// from 0); a non-nil error refuses that session with it.
func StartFake(t testing.TB, leaseTTL, heartbeat time.Duration, refuse func(n int) error, opts ...FakeOption) *Fake {
	t.Helper()
	f := &Fake{LeaseTTL: leaseTTL, HeartbeatInterval: heartbeat, refuse: refuse}
	for _, o := range opts {
		o(f)
	}
	mux := http.NewServeMux()
	mux.Handle(conveyorv1connect.NewWorkerServiceHandler(f))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	t.Cleanup(func() {
		f.mu.Lock()
		for _, s := range f.sessions {
			s.Cut(nil)
		}
		f.mu.Unlock()
		srv.CloseClientConnections()
		srv.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, p := range f.problems {
			t.Errorf("fake server: %s", p)
		}
	})
	f.URL = srv.URL
	return f
}

// Session serves one worker session.
func (f *Fake) Session(ctx context.Context, stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]) error {
	f.mu.Lock()
	n := len(f.attempts)
	f.attempts = append(f.attempts, time.Now())
	refuse := f.refuse
	f.mu.Unlock()
	if refuse != nil {
		if err := refuse(n); err != nil {
			return err
		}
	}
	first, err := stream.Receive()
	if err != nil {
		return err
	}
	hello := first.GetHello()
	if hello == nil {
		f.problem("session %d: the first frame is %T, not Hello", n, first.GetFrame())
		return connect.NewError(connect.CodeInvalidArgument, errors.New("the first frame must be Hello"))
	}
	s := &FakeSession{
		ID: fmt.Sprintf("fake-session-%d", n), Hello: hello,
		send: make(chan *conveyorv1.ServerMessage, 4096), cut: make(chan error, 1),
		reqClosed: make(chan struct{}), ended: make(chan struct{}),
	}
	defer close(s.ended)
	// Frames before the Welcome are recorded too: there must be none.
	go s.receive(stream)
	if f.welcomeDelay > 0 {
		t := time.NewTimer(f.welcomeDelay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
	s.mu.Lock()
	s.welcomed = time.Now()
	s.mu.Unlock()
	// Listed before the Welcome goes out: a test that sees the worker
	// ready must find this session, not the one before it (a Cut sent to
	// that one, long ended, would be lost).
	f.mu.Lock()
	f.sessions = append(f.sessions, s)
	f.mu.Unlock()
	if err := stream.Send(&conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Welcome{Welcome: &conveyorv1.Welcome{
		SessionId: s.ID, LeaseTtl: durationpb.New(f.LeaseTTL), HeartbeatInterval: durationpb.New(f.HeartbeatInterval),
		ServerVersion: "v0.0.0-conformance-fake",
	}}}); err != nil {
		return err
	}
	for {
		select {
		case m := <-s.send:
			if err := stream.Send(m); err != nil {
				return err
			}
		case err := <-s.cut:
			return err
		case <-s.reqClosed:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (s *FakeSession) receive(stream *connect.BidiStream[conveyorv1.WorkerMessage, conveyorv1.ServerMessage]) {
	defer close(s.reqClosed)
	for {
		m, err := stream.Receive()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.frames = append(s.frames, Frame{At: time.Now(), Msg: m})
		s.mu.Unlock()
	}
}

func (f *Fake) problem(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.problems = append(f.problems, fmt.Sprintf(format, args...))
}

// Attempts returns when each session attempt (refused or not) arrived.
func (f *Fake) Attempts() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]time.Time(nil), f.attempts...)
}

// Sessions returns the accepted sessions so far.
func (f *Fake) Sessions() []*FakeSession {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*FakeSession(nil), f.sessions...)
}

// Send queues m for the worker.
func (s *FakeSession) Send(m *conveyorv1.ServerMessage) { s.send <- m }

// Dispatch sends a Dispatch of a task of type typ with payload, as
// attempt attempt, with deadline (zero: none).
func (s *FakeSession) Dispatch(id, attempt, typ, payload string, deadline time.Time) {
	d := &conveyorv1.Dispatch{AttemptId: attempt, Task: Envelope(id, attempt, typ, payload)}
	if !deadline.IsZero() {
		d.Deadline = timestamp(deadline)
	}
	s.Send(&conveyorv1.ServerMessage{Frame: &conveyorv1.ServerMessage_Dispatch{Dispatch: d}})
}

// Cut ends the stream with err (nil: a clean end).
func (s *FakeSession) Cut(err error) {
	select {
	case s.cut <- err:
	default:
	}
}

// Welcomed returns when the Welcome was sent.
func (s *FakeSession) Welcomed() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.welcomed
}

// RequestClosed is closed when the worker closed its side of the stream.
func (s *FakeSession) RequestClosed() <-chan struct{} { return s.reqClosed }

// Frames returns the frames the worker sent so far.
func (s *FakeSession) Frames() []Frame {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Frame(nil), s.frames...)
}

// Results returns the Results the worker sent for attempt.
func (s *FakeSession) Results(attempt string) []*conveyorv1.Result {
	var out []*conveyorv1.Result
	for _, f := range s.Frames() {
		if r := f.Msg.GetResult(); r != nil && r.GetAttemptId() == attempt {
			out = append(out, r)
		}
	}
	return out
}

// Heartbeats returns the Heartbeat frames so far.
func (s *FakeSession) Heartbeats() []Frame {
	var out []Frame
	for _, f := range s.Frames() {
		if f.Msg.GetHeartbeat() != nil {
			out = append(out, f)
		}
	}
	return out
}
