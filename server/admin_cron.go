package server

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/conveyor-dev/conveyor/broker"
	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/scheduler"
	"github.com/conveyor-dev/conveyor/server/internal/wire"
)

func (a *adminService) CreateCron(ctx context.Context, req *connect.Request[conveyorv1.CreateCronRequest]) (*connect.Response[conveyorv1.CronEntry], error) {
	w := req.Msg.GetEntry()
	if w == nil {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("entry is required"))
	}
	e, err := validCron(w, a.server.now())
	if err != nil {
		return nil, err
	}
	stored, err := a.broker.CreateCron(ctx, e)
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	return connect.NewResponse(cronInfo(stored)), nil
}

// UpdateCron replaces every field of an entry but its id, or only the
// fields its update_mask names; see cronUpdate.
func (a *adminService) UpdateCron(ctx context.Context, req *connect.Request[conveyorv1.UpdateCronRequest]) (*connect.Response[conveyorv1.CronEntry], error) {
	w := req.Msg.GetEntry()
	if w.GetId() == "" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("entry.id is required: it names the entry to change"))
	}
	update, err := cronUpdate(w, req.Msg.GetUpdateMask().GetPaths(), a.server.now())
	if err != nil {
		return nil, err
	}
	stored, err := a.broker.UpdateCron(ctx, w.GetId(), update)
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	return connect.NewResponse(cronInfo(stored)), nil
}

func (a *adminService) GetCron(ctx context.Context, req *connect.Request[conveyorv1.GetCronRequest]) (*connect.Response[conveyorv1.CronEntry], error) {
	if err := requireCronID(req.Msg.GetId()); err != nil {
		return nil, err
	}
	e, err := a.broker.Cron(ctx, req.Msg.GetId())
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	return connect.NewResponse(cronInfo(e)), nil
}

func (a *adminService) ListCrons(ctx context.Context, _ *connect.Request[conveyorv1.ListCronsRequest]) (*connect.Response[conveyorv1.ListCronsResponse], error) {
	entries, err := a.broker.Crons(ctx)
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	out := &conveyorv1.ListCronsResponse{Entries: make([]*conveyorv1.CronEntry, len(entries))}
	for i, e := range entries {
		out.Entries[i] = cronInfo(e)
	}
	return connect.NewResponse(out), nil
}

func (a *adminService) DeleteCron(ctx context.Context, req *connect.Request[conveyorv1.DeleteCronRequest]) (*connect.Response[conveyorv1.DeleteCronResponse], error) {
	if err := requireCronID(req.Msg.GetId()); err != nil {
		return nil, err
	}
	err := a.broker.DeleteCron(ctx, req.Msg.GetId())
	a.server.metrics.cronDeleted(req.Msg.GetId())
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	return connect.NewResponse(&conveyorv1.DeleteCronResponse{}), nil
}

func (a *adminService) PauseCron(ctx context.Context, req *connect.Request[conveyorv1.PauseCronRequest]) (*connect.Response[conveyorv1.CronEntry], error) {
	if err := requireCronID(req.Msg.GetId()); err != nil {
		return nil, err
	}
	e, err := a.broker.UpdateCron(ctx, req.Msg.GetId(), func(e broker.CronEntry) (broker.CronEntry, error) {
		e.Paused, e.NextRun = true, time.Time{}
		return e, nil
	})
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	return connect.NewResponse(cronInfo(e)), nil
}

// requireCronID refuses a call that names no entry: a required field is
// missing (invalid_argument, as for GetTask), which is not the same as
// naming an entry that does not exist (not_found).
func requireCronID(id string) error {
	if id == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("id is required: it names the cron entry"))
	}
	return nil
}

// ResumeCron's update ends with errNotPaused for an entry that is not
// paused, and with errSpecMoved when the spec changed since it was parsed:
// an update's error stores nothing.
var (
	errNotPaused = errors.New("not paused")
	errSpecMoved = errors.New("spec changed")
)

// ResumeCron lets a paused entry fire again from its next scheduled time
// after now: the fires it would have had while paused are not replayed.
// The next run is counted from the spec stored when the entry resumes, in
// the same step: the spec is parsed before the engine's lock (a CRON_TZ
// spec reads a zone file), and the resume starts again if it changed
// meanwhile. Resuming an entry that is not paused changes nothing.
func (a *adminService) ResumeCron(ctx context.Context, req *connect.Request[conveyorv1.ResumeCronRequest]) (*connect.Response[conveyorv1.CronEntry], error) {
	if err := requireCronID(req.Msg.GetId()); err != nil {
		return nil, err
	}
	now := a.server.now()
	seen, err := a.broker.Cron(ctx, req.Msg.GetId())
	for err == nil && seen.Paused {
		sched, perr := scheduler.ParseCronSpec(seen.Spec, now)
		if perr != nil {
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("cron entry %q cannot resume: %w", seen.ID, perr))
		}
		var resumed broker.CronEntry
		resumed, err = a.broker.UpdateCron(ctx, seen.ID, func(e broker.CronEntry) (broker.CronEntry, error) {
			if !e.Paused {
				return e, errNotPaused
			}
			if e.Spec != seen.Spec {
				return e, errSpecMoved
			}
			e.Paused, e.NextRun = false, sched.Next(now)
			return e, nil
		})
		if err == nil {
			return connect.NewResponse(cronInfo(resumed)), nil
		}
		if errors.Is(err, errNotPaused) || errors.Is(err, errSpecMoved) {
			seen, err = a.broker.Cron(ctx, seen.ID)
		}
	}
	if err != nil {
		return nil, wire.ConnectError(a.server.log, err)
	}
	return connect.NewResponse(cronInfo(seen)), nil
}

// cronFields are the fields of CronEntry an update_mask may name, each
// with how it copies its value from the request's entry onto the stored
// one: the schedule and the task template, options whole or one at a
// time. The others are the server's: id names the entry, paused has
// PauseCron and ResumeCron, the rest is the entry's history.
var cronFields = cronMaskFields()

func cronMaskFields() map[string]func(dst, src *conveyorv1.CronEntry) {
	fields := map[string]func(dst, src *conveyorv1.CronEntry){}
	entry := (*conveyorv1.CronEntry)(nil).ProtoReflect().Descriptor().Fields()
	for _, name := range []protoreflect.Name{"spec", "queue", "type", "payload", "content_type", "metadata", "options"} {
		fd := entry.ByName(name)
		fields[string(name)] = func(dst, src *conveyorv1.CronEntry) { copyField(dst.ProtoReflect(), src.ProtoReflect(), fd) }
	}
	options := (*conveyorv1.TaskOptions)(nil).ProtoReflect().Descriptor().Fields()
	for i := range options.Len() {
		fd := options.Get(i)
		fields["options."+string(fd.Name())] = func(dst, src *conveyorv1.CronEntry) {
			if dst.Options == nil {
				dst.Options = &conveyorv1.TaskOptions{}
			}
			copyField(dst.Options.ProtoReflect(), src.GetOptions().ProtoReflect(), fd)
		}
	}
	return fields
}

// copyField sets fd of dst to its value in src, or clears it where src
// has none.
func copyField(dst, src protoreflect.Message, fd protoreflect.FieldDescriptor) {
	if src.Has(fd) {
		dst.Set(fd, src.Get(fd))
	} else {
		dst.Clear(fd)
	}
}

// cronUpdate is how UpdateCron changes the stored entry to w. Without
// paths it replaces every field but the id (the run history is the
// engine's to keep), and the next run is counted from now. With paths it
// copies the fields they name onto the stored entry, inside the engine's
// step, and validates the result as a whole entry; its next run is
// counted from now when spec is among them, and kept otherwise: changing
// what a fire enqueues does not move the fire. The spec is parsed here,
// before the engine's lock, and only when the update gives one: a stored
// spec was checked when stored, and its zone may since have gone from the
// system without making the rest of the entry unchangeable.
func cronUpdate(w *conveyorv1.CronEntry, paths []string, now time.Time) (func(broker.CronEntry) (broker.CronEntry, error), error) {
	if len(paths) == 0 {
		e, err := validCron(w, now) // it needs nothing stored: checked before the engine's lock
		if err != nil {
			return nil, err
		}
		return func(broker.CronEntry) (broker.CronEntry, error) { return e, nil }, nil
	}
	set := make([]func(dst, src *conveyorv1.CronEntry), len(paths))
	for i, p := range paths {
		if set[i] = cronFields[p]; set[i] == nil {
			known := slices.Sorted(maps.Keys(cronFields))
			return nil, connect.NewError(connect.CodeInvalidArgument,
				fmt.Errorf("update_mask.paths[%d]: %q is not a field of CronEntry an update can set; the fields are %s", i, wire.TruncateUTF8(p, wire.MaxEchoBytes), strings.Join(known, ", ")))
		}
	}
	var sched scheduler.CronSchedule
	if slices.Contains(paths, "spec") {
		var err error
		if sched, err = cronSchedule(w.GetSpec(), now); err != nil {
			return nil, invalidEntry(err)
		}
	}
	return func(stored broker.CronEntry) (broker.CronEntry, error) {
		merged := cronInfo(stored)
		for _, f := range set {
			f(merged, w)
		}
		e, err := cronTemplate(merged, now)
		if err != nil {
			return e, invalidEntry(err)
		}
		e.NextRun = stored.NextRun
		if sched != nil {
			e.NextRun = time.Time{}
			if !e.Paused {
				e.NextRun = sched.Next(now)
			}
		}
		return e, nil
	}, nil
}

// validCron is w as stored, or invalid_argument naming what is wrong.
func validCron(w *conveyorv1.CronEntry, now time.Time) (broker.CronEntry, error) {
	e, err := cronEntry(w, now)
	if err != nil {
		return e, invalidEntry(err)
	}
	return e, nil
}

// invalidEntry is a validation error of an entry as invalid_argument,
// naming the field under entry.
func invalidEntry(err error) error {
	return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("entry.%w", err))
}
