package conveyor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
)

// Periodic jobs: cron entries declared next to the handlers that run them.
// The server fires cron entries (AdminService); a Worker only keeps the
// entries it declares in step with its code, when Run starts, before its
// session opens. An entry is the server's, by its id: declaring one that
// exists updates its task template (and its schedule when the spec
// differs), so any number of worker processes may declare the same entry
// and it still fires once per tick (the server records each fire with the
// entry, in one commit). An entry the code no longer declares is left as
// it is: delete it with the CLI or AdminService.DeleteCron.

// adminClient is the part of AdminService a Worker calls.
type adminClient interface {
	CreateCron(context.Context, *connect.Request[conveyorv1.CreateCronRequest]) (*connect.Response[conveyorv1.CronEntry], error)
	GetCron(context.Context, *connect.Request[conveyorv1.GetCronRequest]) (*connect.Response[conveyorv1.CronEntry], error)
	UpdateCron(context.Context, *connect.Request[conveyorv1.UpdateCronRequest]) (*connect.Response[conveyorv1.CronEntry], error)
}

// periodicJob is one declared entry.
type periodicJob struct {
	id, spec string
	task     *Task
}

// Periodic declares the cron entry id: a task like task (its type,
// payload, queue, content type, metadata and options) enqueued on spec's
// schedule (a five-field cron expression, a descriptor such as @hourly or
// @every 10m, optionally prefixed CRON_TZ=Zone; docs/workflows.md, Cron).
// Run creates the entry, or updates it, before its session opens; an entry
// the server refuses (a bad spec, an option a cron task cannot have, such
// as ProcessIn) makes Run return the server's error. Declaring one id twice
// is an error, as are an empty id or spec and a nil task.
func (w *Worker) Periodic(id, spec string, task *Task) error {
	switch {
	case id == "" || spec == "":
		return errors.New("conveyor: Periodic needs an id and a spec")
	case task == nil:
		return errors.New("conveyor: Periodic needs a task")
	case task.err != nil:
		return task.err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.periodic {
		if p.id == id {
			return fmt.Errorf("conveyor: periodic job %q is declared twice", id)
		}
	}
	w.periodic = append(w.periodic, periodicJob{id: id, spec: spec, task: task})
	return nil
}

// cronEntry is the entry j declares.
func (j periodicJob) cronEntry() *conveyorv1.CronEntry {
	r := j.task.req
	return &conveyorv1.CronEntry{Id: j.id, Spec: j.spec, Queue: r.GetQueue(), Type: r.GetType(), Payload: r.GetPayload(),
		ContentType: r.GetContentType(), Metadata: r.GetMetadata(), Options: r.GetOptions()}
}

// declarePeriodic creates or updates every declared entry, trying the
// servers in order and, while none answers, again with the reconnect
// backoff; it gives up on an error a retry cannot mend, or when ctx ends.
func (w *Worker) declarePeriodic(ctx context.Context) error {
	w.mu.RLock()
	jobs := append([]periodicJob(nil), w.periodic...)
	w.mu.RUnlock()
	for failed := 0; len(jobs) > 0; failed++ {
		var err error
		for _, srv := range w.servers {
			if err = declareEach(ctx, srv.admin, jobs); err == nil {
				return nil
			}
			if !retryable(err) {
				return fmt.Errorf("conveyor: declaring the periodic jobs: %w", wrapError(err))
			}
		}
		delay := w.cfg.backoff.delay(failed)
		w.log.Warn("declaring the periodic jobs failed; trying again", "err", err, "delay", delay)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return context.Cause(ctx)
		}
	}
	return nil
}

// declareEach declares jobs on one server.
func declareEach(ctx context.Context, admin adminClient, jobs []periodicJob) error {
	for _, j := range jobs {
		if err := declare(ctx, admin, j.cronEntry()); err != nil {
			return err
		}
	}
	return nil
}

// declare creates entry, or, when its id exists, updates its template, and
// its spec only when that differs: naming the spec restarts the schedule
// from now, which a worker restarting more often than the entry fires
// would otherwise keep doing.
func declare(ctx context.Context, admin adminClient, entry *conveyorv1.CronEntry) error {
	_, err := admin.CreateCron(ctx, connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: entry}))
	if connect.CodeOf(err) != connect.CodeAlreadyExists {
		return err
	}
	stored, err := admin.GetCron(ctx, connect.NewRequest(&conveyorv1.GetCronRequest{Id: entry.GetId()}))
	if err != nil {
		return err
	}
	paths := []string{"queue", "type", "payload", "content_type", "metadata", "options"}
	if stored.Msg.GetSpec() != entry.GetSpec() {
		paths = append(paths, "spec")
	} else if sameTemplate(stored.Msg, entry) {
		return nil
	}
	_, err = admin.UpdateCron(ctx, connect.NewRequest(&conveyorv1.UpdateCronRequest{Entry: entry,
		UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}}))
	return err
}

// sameTemplate reports whether stored already enqueues what entry
// declares (the server fills the defaults of the fields left empty).
func sameTemplate(stored, entry *conveyorv1.CronEntry) bool {
	same := func(got, want string) bool { return want == "" || got == want }
	return same(stored.GetQueue(), entry.GetQueue()) && stored.GetType() == entry.GetType() &&
		string(stored.GetPayload()) == string(entry.GetPayload()) && same(stored.GetContentType(), entry.GetContentType()) &&
		maps.Equal(stored.GetMetadata(), entry.GetMetadata()) &&
		proto.Equal(orEmpty(stored.GetOptions()), orEmpty(entry.GetOptions()))
}

func orEmpty(o *conveyorv1.TaskOptions) *conveyorv1.TaskOptions {
	if o == nil {
		return &conveyorv1.TaskOptions{}
	}
	return o
}

// retryable reports whether a failed declaration may succeed later: the
// server was unreachable or busy, not refusing the entry.
func retryable(err error) bool {
	switch connect.CodeOf(err) {
	case connect.CodeUnavailable, connect.CodeDeadlineExceeded, connect.CodeResourceExhausted,
		connect.CodeAborted, connect.CodeInternal, connect.CodeUnknown:
		return true
	}
	return false
}
