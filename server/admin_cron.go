package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/scheduler"
)

func (a *adminService) CreateCron(ctx context.Context, req *connect.Request[conveyorv1.CreateCronRequest]) (*connect.Response[conveyorv1.CronEntry], error) {
	return a.putCron(ctx, req.Msg.GetEntry(), true)
}

func (a *adminService) UpdateCron(ctx context.Context, req *connect.Request[conveyorv1.UpdateCronRequest]) (*connect.Response[conveyorv1.CronEntry], error) {
	if req.Msg.GetEntry().GetId() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("entry.id is required: it names the entry to replace"))
	}
	return a.putCron(ctx, req.Msg.GetEntry(), false)
}

// putCron stores a new entry (create) or replaces every field of an
// existing one but its id; its next run is counted from now.
func (a *adminService) putCron(ctx context.Context, w *conveyorv1.CronEntry, create bool) (*connect.Response[conveyorv1.CronEntry], error) {
	if w == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("entry is required"))
	}
	e, _, err := cronEntry(w, a.server.now())
	if err != nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("entry.%w", err))
	}
	stored, err := a.broker.PutCron(ctx, e, create)
	if err != nil {
		return nil, toConnectError(a.server.log, err)
	}
	return connect.NewResponse(cronInfo(stored)), nil
}

func (a *adminService) GetCron(ctx context.Context, req *connect.Request[conveyorv1.GetCronRequest]) (*connect.Response[conveyorv1.CronEntry], error) {
	e, err := a.broker.Cron(ctx, req.Msg.GetId())
	if err != nil {
		return nil, toConnectError(a.server.log, err)
	}
	return connect.NewResponse(cronInfo(e)), nil
}

func (a *adminService) ListCrons(ctx context.Context, _ *connect.Request[conveyorv1.ListCronsRequest]) (*connect.Response[conveyorv1.ListCronsResponse], error) {
	entries, err := a.broker.Crons(ctx)
	if err != nil {
		return nil, toConnectError(a.server.log, err)
	}
	out := &conveyorv1.ListCronsResponse{Entries: make([]*conveyorv1.CronEntry, len(entries))}
	for i, e := range entries {
		out.Entries[i] = cronInfo(e)
	}
	return connect.NewResponse(out), nil
}

func (a *adminService) DeleteCron(ctx context.Context, req *connect.Request[conveyorv1.DeleteCronRequest]) (*connect.Response[conveyorv1.DeleteCronResponse], error) {
	if err := a.broker.DeleteCron(ctx, req.Msg.GetId()); err != nil {
		return nil, toConnectError(a.server.log, err)
	}
	a.server.metrics.cronDeleted(req.Msg.GetId())
	return connect.NewResponse(&conveyorv1.DeleteCronResponse{}), nil
}

func (a *adminService) PauseCron(ctx context.Context, req *connect.Request[conveyorv1.PauseCronRequest]) (*connect.Response[conveyorv1.CronEntry], error) {
	e, err := a.broker.SetCronPaused(ctx, req.Msg.GetId(), true, time.Time{})
	if err != nil {
		return nil, toConnectError(a.server.log, err)
	}
	return connect.NewResponse(cronInfo(e)), nil
}

// ResumeCron lets a paused entry fire again from its next scheduled time
// after now: the fires it would have had while paused are not replayed.
// Resuming an entry that is not paused changes nothing.
func (a *adminService) ResumeCron(ctx context.Context, req *connect.Request[conveyorv1.ResumeCronRequest]) (*connect.Response[conveyorv1.CronEntry], error) {
	e, err := a.broker.Cron(ctx, req.Msg.GetId())
	if err != nil {
		return nil, toConnectError(a.server.log, err)
	}
	if !e.Paused {
		return connect.NewResponse(cronInfo(e)), nil
	}
	now := a.server.now()
	sched, err := scheduler.ParseCronSpec(e.Spec, now)
	if err != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("cron entry %q cannot resume: %w", e.ID, err))
	}
	e, err = a.broker.SetCronPaused(ctx, e.ID, false, sched.Next(now))
	if err != nil {
		return nil, toConnectError(a.server.log, err)
	}
	return connect.NewResponse(cronInfo(e)), nil
}
