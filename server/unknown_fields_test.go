package server_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// withUnknown returns m with a field this schema does not have, of n bytes.
func withUnknown[M proto.Message](m M, n int) M {
	raw := protowire.AppendTag(nil, 9999, protowire.BytesType)
	m.ProtoReflect().SetUnknown(protowire.AppendBytes(raw, bytes.Repeat([]byte{'x'}, n)))
	return m
}

// TestUnknownOptionFieldsAreIgnored: fields of TaskOptions the server does
// not know (a newer client's, or junk) are ignored (§8), not stored with
// the task and sent on to workers: kept, they would carry any number of
// bytes past the payload and metadata limits. The binary formats carry
// them; Connect's JSON drops them on decoding.
func TestUnknownOptionFieldsAreIgnored(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	known := func() *conveyorv1.TaskOptions {
		return &conveyorv1.TaskOptions{Priority: 7, RetryPolicy: &conveyorv1.RetryPolicy{Base: dur(time.Second)}}
	}
	sent := withUnknown(known(), 2*server.MaxPayloadBytes)
	withUnknown(sent.RetryPolicy, 1024)
	ctx := context.Background()
	for _, p := range []servertest.Protocol{servertest.GRPC, servertest.GRPCWeb} {
		t.Run(string(p), func(t *testing.T) {
			client := taskClient(t, s, p)
			res, err := client.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t", Options: sent}))
			if err != nil {
				t.Fatal(err)
			}
			got, err := client.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: res.Msg.GetTask().GetId()}))
			if err != nil {
				t.Fatal(err)
			}
			if o := got.Msg.GetOptions(); !proto.Equal(o, known()) {
				t.Errorf("stored options are %d bytes, want the %d of the known fields", proto.Size(o), proto.Size(known()))
			}
		})
	}
	entry, err := adminClient(t, s).CreateCron(ctx, connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: &conveyorv1.CronEntry{
		Spec: "@hourly", Type: "t", Options: sent}}))
	if err != nil {
		t.Fatal(err)
	}
	if o := entry.Msg.GetOptions(); !proto.Equal(o, known()) {
		t.Errorf("a cron entry's stored options are %d bytes, want the %d of the known fields", proto.Size(o), proto.Size(known()))
	}
}
