package server_test

import (
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestSessionEnvelopeInEveryFormat dispatches a task that sets every
// envelope field to a session in each wire format (the JSON one included,
// which no other session test drives to a Dispatch): the worker decodes
// the same envelope from each, and no field the envelope does not
// declare.
func TestSessionEnvelopeInEveryFormat(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	tasks := taskClient(t, s, servertest.GRPC)
	ctx := context.Background()
	for _, p := range servertest.Protocols {
		queue := "env-" + string(p)
		opts := &conveyorv1.TaskOptions{MaxRetry: 3, Priority: 7, Timeout: durationpb.New(time.Minute),
			UniqueKey:   "u-" + string(p),
			RetryPolicy: &conveyorv1.RetryPolicy{Strategy: conveyorv1.RetryStrategy_RETRY_STRATEGY_FIXED, Base: durationpb.New(time.Second)}}
		req := &conveyorv1.EnqueueRequest{Queue: queue, Type: "email:send", Payload: []byte(`{"to":"ada@example.com"}`),
			ContentType: "application/json", Metadata: map[string]string{"tenant": "acme", "trace": "x1"}, Options: opts}
		res, err := tasks.Enqueue(ctx, connect.NewRequest(req))
		if err != nil {
			t.Fatal(err)
		}
		w, _, err := openSession(t, s, p, &conveyorv1.Hello{Queues: map[string]int32{queue: 1}, Concurrency: 1, SdkVersion: "test"})
		if err != nil {
			t.Fatal(err)
		}
		d := w.next(10 * time.Second).GetDispatch()
		got := d.GetTask()
		want := &conveyorv1.TaskEnvelope{Id: res.Msg.GetTask().GetId(), Queue: queue, Type: req.Type, Payload: req.Payload,
			ContentType: req.ContentType, Metadata: req.Metadata, Options: opts, MaxRetry: 3, Priority: 7, AttemptId: d.GetAttemptId()}
		if d.GetAttemptId() == "" || !proto.Equal(got, want) {
			t.Errorf("%s: dispatched %v\nwant %v", p, got, want)
		}
		if u := got.ProtoReflect().GetUnknown(); len(u) != 0 {
			t.Errorf("%s: the envelope carries %d bytes of fields it does not declare", p, len(u))
		}
		if err := w.stream.CloseRequest(); err != nil {
			t.Fatal(err)
		}
	}
}
