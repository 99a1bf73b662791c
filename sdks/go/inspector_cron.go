package conveyor

import (
	"context"
	"time"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
)

// CronEntry is a periodic task: a schedule and the template of the task
// each fire enqueues. Every fired task carries the metadata
// conveyor-cron-id and conveyor-cron-fire besides the entry's; fires
// missed while the server was down are skipped, not replayed.
type CronEntry struct {
	// ID identifies the entry: at most 1,024 bytes matching
	// ^[a-zA-Z0-9][a-zA-Z0-9-_.]*$. Empty in CreateCron lets the server
	// assign a ULID.
	ID string
	// Spec is the schedule: five cron fields (six with seconds first) or a
	// descriptor (@hourly, @daily, @every 1m30s), optionally after
	// "CRON_TZ=Area/City " (UTC without one).
	Spec string
	// Queue is the queue the fired tasks go to; empty means "default".
	Queue string
	// Type is the fired tasks' type; required.
	Type string
	// Payload is the fired tasks' payload.
	Payload []byte
	// ContentType names the payload's codec; empty means application/json.
	ContentType string
	// Metadata is copied to every fired task.
	Metadata map[string]string
	// Options are applied to every fired task. Fixed times (Deadline,
	// ProcessAt, ExpiresAt) are refused, as an entry fires again and
	// again: give relative ones (ProcessIn, ExpiresIn, Timeout).
	Options TaskOptions
	// Paused is true while the entry does not fire. CreateCron may create
	// an entry paused, and UpdateCron without fields stores it as given;
	// otherwise PauseCron and ResumeCron change it.
	Paused bool

	// The server's, which no call takes:

	// NextRunAt is when the entry fires next; zero while paused.
	NextRunAt time.Time
	// LastRunAt is when the entry last fired; zero before its first fire.
	LastRunAt time.Time
	// LastTaskID is the task the latest fire enqueued.
	LastTaskID string
	// LastError says why the latest fire enqueued no task (its queue was
	// full, its unique key was held); empty when it enqueued one.
	LastError string
}

func newCronEntry(m *conveyorv1.CronEntry) *CronEntry {
	return &CronEntry{
		ID: m.GetId(), Spec: m.GetSpec(), Queue: m.GetQueue(), Type: m.GetType(), Payload: m.GetPayload(),
		ContentType: m.GetContentType(), Metadata: m.GetMetadata(), Options: taskOptions(m.GetOptions()),
		Paused: m.GetPaused(), NextRunAt: timeOrZero(m.GetNextRunAt()), LastRunAt: timeOrZero(m.GetLastRunAt()),
		LastTaskID: m.GetLastTaskId(), LastError: m.GetLastError(),
	}
}

// proto is e on the wire, without the server's fields: no call takes them.
func (e CronEntry) proto() *conveyorv1.CronEntry {
	return &conveyorv1.CronEntry{Id: e.ID, Spec: e.Spec, Queue: e.Queue, Type: e.Type, Payload: e.Payload,
		ContentType: e.ContentType, Metadata: e.Metadata, Options: e.Options.proto(), Paused: e.Paused}
}

// CronField names a field of a CronEntry for UpdateCron: its name on the
// wire (conveyor.v1.CronEntry).
type CronField string

// The fields UpdateCron can change one by one. CronFieldOptions names
// every option at once; CronFieldOption names one.
const (
	CronFieldSpec        CronField = "spec"
	CronFieldQueue       CronField = "queue"
	CronFieldType        CronField = "type"
	CronFieldPayload     CronField = "payload"
	CronFieldContentType CronField = "content_type"
	// CronFieldMetadata names the whole metadata map.
	CronFieldMetadata CronField = "metadata"
	CronFieldOptions  CronField = "options"
)

// CronFieldOption names one task option of a CronEntry by its name on the
// wire (conveyor.v1.TaskOptions), such as "priority", "max_retry" or
// "unique_key".
func CronFieldOption(name string) CronField { return CronField("options." + name) }

// CreateCron stores a new cron entry and returns it as stored, with its
// id and next run. A spec or template the server refuses fails with
// ErrInvalidArgument naming the field; an id already taken with
// ErrAlreadyExists. The server's fields (NextRunAt and after) are not
// sent.
func (i *Inspector) CreateCron(ctx context.Context, entry CronEntry) (*CronEntry, error) {
	res, err := adminCall(ctx, i.admin, &conveyorv1.CreateCronRequest{Entry: entry.proto()}, once, conveyorv1connect.AdminServiceClient.CreateCron)
	if err != nil {
		return nil, err
	}
	return newCronEntry(res), nil
}

// GetCron returns the cron entry with id. An unknown id fails with
// ErrNotFound, an empty one with ErrInvalidArgument.
func (i *Inspector) GetCron(ctx context.Context, id string) (*CronEntry, error) {
	res, err := adminCall(ctx, i.admin, &conveyorv1.GetCronRequest{Id: id}, repeatable, conveyorv1connect.AdminServiceClient.GetCron)
	if err != nil {
		return nil, err
	}
	return newCronEntry(res), nil
}

// ListCrons lists every cron entry, ordered by id.
func (i *Inspector) ListCrons(ctx context.Context) ([]*CronEntry, error) {
	res, err := adminCall(ctx, i.admin, &conveyorv1.ListCronsRequest{}, repeatable, conveyorv1connect.AdminServiceClient.ListCrons)
	if err != nil {
		return nil, err
	}
	out := make([]*CronEntry, len(res.GetEntries()))
	for k, e := range res.GetEntries() {
		out[k] = newCronEntry(e)
	}
	return out, nil
}

// UpdateCron changes the cron entry entry.ID names and returns it as
// stored. With fields, only those are stored from entry and the others
// keep their values: the server reads and writes the entry in one step,
// so two callers changing different fields at once both keep their
// change (Paused is not such a field: PauseCron and ResumeCron change it).
// Without fields, entry replaces every field but the id and the history,
// Paused included. The result is validated as a whole entry is. The next
// run is counted from now when the update changes the spec (or replaces
// the entry), and kept otherwise, so that a change to the task template
// does not move the next fire.
//
//	// Fire every 10 minutes from now on; nothing else changes.
//	insp.UpdateCron(ctx, conveyor.CronEntry{ID: "sync", Spec: "@every 10m"}, conveyor.CronFieldSpec)
//
// An unknown id fails with ErrNotFound; a field that is not one of
// UpdateCron's, or an entry the server refuses, with ErrInvalidArgument.
func (i *Inspector) UpdateCron(ctx context.Context, entry CronEntry, fields ...CronField) (*CronEntry, error) {
	req := &conveyorv1.UpdateCronRequest{Entry: entry.proto()}
	if len(fields) > 0 {
		req.UpdateMask = &fieldmaskpb.FieldMask{Paths: make([]string, len(fields))}
		for k, f := range fields {
			req.UpdateMask.Paths[k] = string(f)
		}
	}
	res, err := adminCall(ctx, i.admin, req, once, conveyorv1connect.AdminServiceClient.UpdateCron)
	if err != nil {
		return nil, err
	}
	return newCronEntry(res), nil
}

// DeleteCron removes the cron entry with id; the tasks it fired stay. An
// unknown id fails with ErrNotFound.
func (i *Inspector) DeleteCron(ctx context.Context, id string) error {
	_, err := adminCall(ctx, i.admin, &conveyorv1.DeleteCronRequest{Id: id}, once, conveyorv1connect.AdminServiceClient.DeleteCron)
	return err
}

// PauseCron stops the cron entry with id from firing and returns it,
// paused. An unknown id fails with ErrNotFound.
func (i *Inspector) PauseCron(ctx context.Context, id string) (*CronEntry, error) {
	res, err := adminCall(ctx, i.admin, &conveyorv1.PauseCronRequest{Id: id}, repeatable, conveyorv1connect.AdminServiceClient.PauseCron)
	if err != nil {
		return nil, err
	}
	return newCronEntry(res), nil
}

// ResumeCron lets a paused cron entry fire again, from its next scheduled
// time after now (the fires it would have had while paused are not
// replayed), and returns it. Resuming an entry that is not paused changes
// nothing. An entry whose CRON_TZ zone the server no longer has fails
// with code failed_precondition, an unknown id with ErrNotFound.
func (i *Inspector) ResumeCron(ctx context.Context, id string) (*CronEntry, error) {
	res, err := adminCall(ctx, i.admin, &conveyorv1.ResumeCronRequest{Id: id}, repeatable, conveyorv1connect.AdminServiceClient.ResumeCron)
	if err != nil {
		return nil, err
	}
	return newCronEntry(res), nil
}
