package conveyor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/oklog/ulid/v2"

	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// inspBundle is an Inspector and a Client of one real test server.
type inspBundle struct {
	t      *testing.T
	ctx    context.Context
	srv    *servertest.Server
	insp   *conveyor.Inspector
	client *conveyor.Client
}

func inspSetup(t *testing.T, opts ...conveyor.Option) *inspBundle {
	t.Helper()
	srv := servertest.Start(t, server.Config{})
	return &inspBundle{t: t, ctx: t.Context(), srv: srv, insp: newInspector(t, srv.URL(), opts...), client: newClient(t, srv.URL())}
}

func newInspector(t *testing.T, addr string, opts ...conveyor.Option) *conveyor.Inspector {
	t.Helper()
	i, err := conveyor.NewInspector(addr, opts...)
	if err != nil {
		t.Fatalf("NewInspector: %v", err)
	}
	return i
}

// enqueue stores a task and returns its id.
func (b *inspBundle) enqueue(typ string, opts ...conveyor.TaskOption) string {
	b.t.Helper()
	info, err := b.client.Enqueue(b.ctx, typ, []byte(`{}`), opts...)
	if err != nil {
		b.t.Fatalf("Enqueue(%s): %v", typ, err)
	}
	return info.ID
}

// state is the task's state as the Inspector reads it.
func (b *inspBundle) state(id string) conveyor.TaskState {
	b.t.Helper()
	info, err := b.insp.GetTask(b.ctx, id)
	if err != nil {
		b.t.Fatalf("GetTask(%s): %v", id, err)
	}
	return info.State
}

// wantCode fails the test unless err is an *Error of code.
func wantCode(t *testing.T, what string, err error, code connect.Code) {
	t.Helper()
	var e *conveyor.Error
	if !errors.As(err, &e) || e.Code() != code {
		t.Fatalf("%s: err = %v, want an *Error of code %s", what, err, code)
	}
}

// wantIs fails the test unless errors.Is(err, target).
func wantIs(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: err = %v, want %v", what, err, target)
	}
}

// TestInspectorErrors: the Inspector's errors are the SDK's, as the
// Client's are.
func TestInspectorErrors(t *testing.T) {
	t.Parallel()
	b := inspSetup(t)
	_, err := b.insp.GetTask(b.ctx, ulid.Make().String())
	wantIs(t, "GetTask of a missing task", err, conveyor.ErrNotFound)
	wantCode(t, "GetTask of a missing task", err, connect.CodeNotFound)
	_, err = b.insp.CancelTask(b.ctx, ulid.Make().String())
	wantIs(t, "CancelTask of a missing task", err, conveyor.ErrNotFound)
	_, err = b.insp.PauseQueue(b.ctx, "not a queue name")
	wantIs(t, "PauseQueue of an invalid name", err, conveyor.ErrInvalidArgument)
	_, err = b.insp.ListTasks(b.ctx, conveyor.ListTasksOptions{Queue: "-bad"})
	wantIs(t, "ListTasks of an invalid name", err, conveyor.ErrInvalidArgument)
	_, err = b.insp.ListTasks(b.ctx, conveyor.ListTasksOptions{Queue: "q", PageSize: 1001})
	wantIs(t, "ListTasks of 1001 a page", err, conveyor.ErrInvalidArgument)

	if _, err := conveyor.NewInspector("127.0.0.1:7420"); err == nil {
		t.Error("NewInspector accepted an address without a scheme")
	}
	if _, err := conveyor.NewInspector(b.srv.URL(), conveyor.WithProtocol(conveyor.Protocol(9))); err == nil {
		t.Error("NewInspector accepted a protocol that is not one")
	}
}

// TestInspectorToken: an Inspector sends WithToken's token, and without
// it the server refuses every call as unauthenticated.
func TestInspectorToken(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, server.Config{Token: "s3cret"})
	_, err := newInspector(t, srv.URL()).ListQueues(t.Context())
	wantIs(t, "ListQueues without the token", err, conveyor.ErrUnauthenticated)
	if _, err := newInspector(t, srv.URL(), conveyor.WithToken("s3cret")).ListQueues(t.Context()); err != nil {
		t.Fatalf("ListQueues with the token: %v", err)
	}
}

// TestInspectorProtocols: a unary call, a listing and the BulkTasks stream
// work in each wire format.
func TestInspectorProtocols(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, server.Config{})
	for _, p := range protocols {
		t.Run(p.String(), func(t *testing.T) {
			t.Parallel()
			b := &inspBundle{t: t, ctx: t.Context(), srv: srv, client: newClient(t, srv.URL()),
				insp: newInspector(t, srv.URL(), conveyor.WithProtocol(p))}
			queue := "proto-" + strings.ReplaceAll(p.String(), "-", "")
			id := b.enqueue("t", conveyor.Queue(queue))
			page, err := b.insp.ListTasks(b.ctx, conveyor.ListTasksOptions{Queue: queue})
			if err != nil || len(page.Tasks) != 1 || page.Tasks[0].ID != id {
				t.Fatalf("ListTasks: %v %+v", err, page)
			}
			if _, err := b.insp.PauseQueue(b.ctx, queue); err != nil {
				t.Fatalf("PauseQueue: %v", err)
			}
			got, err := b.insp.BulkTasks(b.ctx, conveyor.TaskActionCancel, conveyor.BulkTasksOptions{Queue: queue, State: conveyor.TaskStatePending})
			if err != nil || !got.Done || got.Succeeded != 1 {
				t.Fatalf("BulkTasks: %v %+v", err, got)
			}
			eq(t, "state after the bulk cancel", b.state(id), conveyor.TaskStateCanceled)
		})
	}
}

// TestInspectorServersSkipsDeadServer: an Inspector given a server that
// refuses connections first and a live one second makes its calls, the
// stream's too, on the live one.
func TestInspectorServersSkipsDeadServer(t *testing.T) {
	t.Parallel()
	srv := servertest.Start(t, server.Config{})
	b := &inspBundle{t: t, ctx: t.Context(), srv: srv, client: newClient(t, srv.URL()),
		insp: newInspector(t, deadURL(t)+","+srv.URL())}
	id := b.enqueue("t", conveyor.Queue("failover"))
	eq(t, "GetTask's state", b.state(id), conveyor.TaskStatePending)
	if _, err := b.insp.CancelTask(b.ctx, id); err != nil { // not repeatable, but never sent to the dead one
		t.Fatalf("CancelTask: %v", err)
	}
	// A second Inspector starts on the dead server again: the stream moves on too.
	insp := newInspector(t, deadURL(t)+","+srv.URL())
	got, err := insp.BulkTasks(b.ctx, conveyor.TaskActionDelete, conveyor.BulkTasksOptions{Queue: "failover", State: conveyor.TaskStateCanceled})
	if err != nil || got.Succeeded != 1 {
		t.Fatalf("BulkTasks: %v %+v", err, got)
	}
	_, err = insp.GetTask(b.ctx, id)
	wantIs(t, "GetTask after the bulk delete", err, conveyor.ErrNotFound)
}

// TestInspectorDeadServer: with no server to reach, a call fails with
// ErrUnavailable, the stream's too.
func TestInspectorDeadServer(t *testing.T) {
	t.Parallel()
	insp := newInspector(t, deadURL(t))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := insp.ListQueues(ctx)
	wantIs(t, "ListQueues", err, conveyor.ErrUnavailable)
	_, err = insp.BulkTasks(ctx, conveyor.TaskActionRun, conveyor.BulkTasksOptions{Queue: "q", State: conveyor.TaskStateArchived})
	wantIs(t, "BulkTasks", err, conveyor.ErrUnavailable)
}
