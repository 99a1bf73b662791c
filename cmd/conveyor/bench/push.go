package bench

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// This file works W3 and W4 through a push endpoint instead of a session
// (Config.Push): the Go SDK's PushHandler, served on loopback by this
// process, that the server invokes with one signed POST per task.

// pushSessionID is how ListWorkers names the bench queue's endpoint.
const pushSessionID = "push:" + benchQueue

// checkPush refuses what push mode cannot measure, and makes up a secret
// for a fresh server.
func (c *Config) checkPush() error {
	if !c.Push {
		return nil
	}
	switch {
	case c.Workload != "W3" && c.Workload != "W4":
		return fmt.Errorf("--push works W3 and W4 only, not %s", c.Workload)
	case c.Nodes > 1:
		return errors.New("--push runs on one node (only the leader pushes)")
	case c.Shape != ShapePlain:
		return errors.New("--push drains plain tasks only (no --shape)")
	case c.Addr != "" && c.PushSecret == "":
		return errors.New("--push with --addr needs --push-secret (or CONVEYOR_PUSH_SECRET): one of that server's")
	}
	if c.PushSecret == "" {
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		c.PushSecret = "whsec_" + base64.StdEncoding.EncodeToString(key)
	}
	return nil
}

// startPushWorkerAt serves the bench handler as the bench queue's push
// endpoint on the server at addr, with concurrency cfg.Concurrency. stop
// removes the endpoint and shuts its HTTP server down.
func (r *runner) startPushWorkerAt(ctx context.Context, addr string, onStart func(seq int)) (stop func() error, err error) {
	w, err := conveyor.NewPushWorker()
	if err != nil {
		return nil, err
	}
	w.HandleFunc(benchType, func(_ context.Context, d *conveyor.Delivery) error {
		onStart(payloadSeq(d.Payload))
		return nil
	})
	h, err := w.PushHandler(conveyor.WithPushSecrets(r.cfg.PushSecret))
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	url := "http://" + ln.Addr().String() + "/conveyor"
	if err := setBenchPush(ctx, adminAt(addr, r.cfg.Token), url, int32(r.cfg.Concurrency)); err != nil {
		_ = srv.Close()
		return nil, fmt.Errorf("configure the push endpoint: %w", err)
	}
	r.res.Settings["workers"] = fmt.Sprintf("a push endpoint (the Go SDK's PushHandler on loopback, HTTP/1.1), concurrency %d", r.cfg.Concurrency)
	return sync.OnceValue(func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		err := setBenchPush(sctx, adminAt(addr, r.cfg.Token), "", 0)
		return errors.Join(err, srv.Shutdown(sctx))
	}), nil
}

// setBenchPush points the bench queue at url ("" removes the endpoint).
func setBenchPush(ctx context.Context, admin conveyorv1connect.AdminServiceClient, url string, concurrency int32) error {
	_, err := admin.UpdateQueueConfig(ctx, connect.NewRequest(&conveyorv1.UpdateQueueConfigRequest{
		Config:     &conveyorv1.QueueConfig{Queue: benchQueue, Push: &conveyorv1.PushEndpoint{Url: url, Concurrency: concurrency}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"push"}},
	}))
	return err
}
