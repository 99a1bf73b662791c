package server_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/server"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// TestErrorsQuoteOnlyAPrefix: a request may carry a string of megabytes
// (a task id, a queue name, a cron spec, a page token), and an error about
// it must still reach the client as the error it is. In gRPC and gRPC-Web
// the message travels in a header (grpc-message), and a Go client refuses
// one of megabytes (HPACK: COMPRESSION_ERROR), so the caller saw a broken
// connection, a transient error, instead of invalid_argument or not_found.
// Every message stays short, whatever the format.
func TestErrorsQuoteOnlyAPrefix(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	ctx := context.Background()
	for _, run := range []struct {
		p    servertest.Protocol
		size int
	}{
		{servertest.GRPC, 11 << 20}, // past the 10 MB a Go client takes in headers
		{servertest.GRPCWeb, 64 << 10},
		{servertest.Connect, 64 << 10},
	} {
		p, huge := run.p, strings.Repeat("a", run.size)
		tasks := taskClient(t, s, p)
		admin := conveyorv1connect.NewAdminServiceClient(servertest.HTTPClient(), s.URL(), p.ClientOption())
		cases := []struct {
			name string
			call func() error
			code connect.Code
			says string
		}{
			{"Enqueue task_id", func() error {
				_, err := tasks.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t", TaskId: huge}))
				return err
			}, connect.CodeInvalidArgument, "task_id"},
			{"Enqueue queue", func() error {
				_, err := tasks.Enqueue(ctx, connect.NewRequest(&conveyorv1.EnqueueRequest{Type: "t", Queue: huge}))
				return err
			}, connect.CodeInvalidArgument, "queue"},
			{"EnqueueTx depends_on", func() error {
				_, err := tasks.EnqueueTx(ctx, connect.NewRequest(&conveyorv1.EnqueueTxRequest{Items: []*conveyorv1.EnqueueRequest{{Type: "t",
					Options: &conveyorv1.TaskOptions{DependsOn: []*conveyorv1.TaskDependency{{TaskId: huge}}}}}}))
				return err
			}, connect.CodeInvalidArgument, "depends_on[0]"},
			{"GetTask id", func() error {
				_, err := tasks.GetTask(ctx, connect.NewRequest(&conveyorv1.GetTaskRequest{Id: huge}))
				return err
			}, connect.CodeNotFound, "not found"},
			{"CancelTask id", func() error {
				_, err := admin.CancelTask(ctx, connect.NewRequest(&conveyorv1.CancelTaskRequest{Id: huge}))
				return err
			}, connect.CodeNotFound, "not found"},
			{"ListTasks page_token", func() error {
				_, err := admin.ListTasks(ctx, connect.NewRequest(&conveyorv1.ListTasksRequest{Queue: "q", PageToken: huge}))
				return err
			}, connect.CodeInvalidArgument, "page token"},
			{"PauseQueue queue", func() error {
				_, err := admin.PauseQueue(ctx, connect.NewRequest(&conveyorv1.PauseQueueRequest{Queue: huge}))
				return err
			}, connect.CodeInvalidArgument, "queue"},
			{"CreateCron spec", func() error {
				_, err := admin.CreateCron(ctx, connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: &conveyorv1.CronEntry{Spec: huge, Type: "t"}}))
				return err
			}, connect.CodeInvalidArgument, "entry.spec"},
			{"GetCron id", func() error {
				_, err := admin.GetCron(ctx, connect.NewRequest(&conveyorv1.GetCronRequest{Id: huge}))
				return err
			}, connect.CodeNotFound, "not found"},
		}
		for _, tc := range cases {
			err := tc.call()
			var ce *connect.Error
			if !errors.As(err, &ce) || ce.Code() != tc.code {
				t.Errorf("%s/%s: %.300v, want %v", p, tc.name, err, tc.code)
				continue
			}
			if !strings.Contains(ce.Message(), tc.says) || len(ce.Message()) > 1024 {
				t.Errorf("%s/%s: message of %d bytes %.200q, want a short one that says %q", p, tc.name, len(ce.Message()), ce.Message(), tc.says)
			}
		}
	}
}

// TestJSONDecodingErrorsAreShort: a JSON body the server cannot read gets
// invalid_argument with a short message, though protojson quotes the
// value it could not read: over gRPC-JSON a bytes field of megabytes of
// bad base64 came back in the grpc-message header, which the client
// refused (the call failed as a broken connection).
func TestJSONDecodingErrorsAreShort(t *testing.T) {
	t.Parallel()
	s := servertest.Start(t, server.Config{})
	body := []byte(`{"type":"t","payload":"` + strings.Repeat("!", 11<<20) + `"}`)
	for _, tc := range []struct {
		name, contentType string
		framed            bool
		client            *http.Client
	}{
		{"grpc+json", "application/grpc+json", true, servertest.HTTPClient()},
		{"grpc-web+json", "application/grpc-web+json", true, servertest.HTTPClient()},
		{"connect json", "application/json", false, servertest.HTTP1Client()},
	} {
		msg := body
		if tc.framed { // a gRPC message: a flag byte and a 4-byte length
			msg = binary.BigEndian.AppendUint32([]byte{0}, uint32(len(body)))
			msg = append(msg, body...)
		}
		req, err := http.NewRequest(http.MethodPost, s.URL()+conveyorv1connect.TaskServiceEnqueueProcedure, bytes.NewReader(msg))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", tc.contentType)
		req.Header.Set("TE", "trailers")
		res, err := tc.client.Do(req)
		if err != nil {
			t.Errorf("%s: %.300v", tc.name, err)
			continue
		}
		raw, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil {
			t.Errorf("%s: reading the answer: %.300v", tc.name, err)
			continue
		}
		status, message := grpcStatus(res, raw)
		if !tc.framed {
			status, message = strconv.Itoa(res.StatusCode), string(raw)
		}
		want := map[bool]string{true: "3", false: "400"}[tc.framed] // invalid_argument
		if status != want || !strings.Contains(message, "payload") || len(message) > 2<<10 {
			t.Errorf("%s: status %s, message of %d bytes %.200q; want %s naming the payload, and short", tc.name, status, len(message), message, want)
		}
	}
}

// grpcStatus is the grpc-status and grpc-message of an answer, from its
// trailers (gRPC) or its trailer frame (gRPC-Web).
func grpcStatus(res *http.Response, body []byte) (string, string) {
	if st := res.Trailer.Get("Grpc-Status") + res.Header.Get("Grpc-Status"); st != "" {
		return st, res.Trailer.Get("Grpc-Message") + res.Header.Get("Grpc-Message")
	}
	for len(body) >= 5 { // gRPC-Web frames; flag 0x80 marks the trailers
		n := int(binary.BigEndian.Uint32(body[1:5]))
		if 5+n > len(body) {
			break
		}
		if body[0]&0x80 != 0 {
			h := http.Header{}
			for _, line := range strings.Split(string(body[5:5+n]), "\r\n") {
				if k, v, ok := strings.Cut(line, ":"); ok {
					h.Add(strings.TrimSpace(k), strings.TrimSpace(v))
				}
			}
			return h.Get("Grpc-Status"), h.Get("Grpc-Message")
		}
		body = body[5+n:]
	}
	return "", ""
}
