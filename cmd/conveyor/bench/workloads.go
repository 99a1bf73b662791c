package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// Every workload uses one queue and the harness's 128-byte JSON payload.
const (
	benchQueue  = "bench"
	benchType   = "bench"
	payloadSize = 128
	batchSize   = 1000
)

var payloadPad = strings.Repeat("x", payloadSize-len(fmt.Sprintf(`{"seq":"%012d","enq_ns":"%019d","pad":""}`, 0, 0)))

// payload is {"seq":…,"enq_ns":…,"pad":"xxx…"}, exactly 128 bytes.
func payload(seq int, enqNs int64) []byte {
	return fmt.Appendf(make([]byte, 0, payloadSize), `{"seq":"%012d","enq_ns":"%019d","pad":"%s"}`, seq, enqNs, payloadPad)
}

// payloadSeq reads seq back from a payload without a JSON decoder.
func payloadSeq(p []byte) int {
	const prefix = `{"seq":"`
	if len(p) < len(prefix)+12 {
		return -1
	}
	n := 0
	for _, c := range p[len(prefix) : len(prefix)+12] {
		n = n*10 + int(c-'0')
	}
	return n
}

var monoBase = time.Now()

func mono() int64 { return int64(time.Since(monoBase)) }

// enqueueBulk enqueues seq [0, n) of the bench queue's tasks (shaped by
// cfg.Shape) in batches of 1000 with cfg.Callers concurrent EnqueueBatch
// calls.
func (r *runner) enqueueBulk(ctx context.Context, n int) error {
	return r.enqueueMany(ctx, n, func(seq int) *conveyor.Task {
		return conveyor.NewTask(r.taskType(seq), payload(seq, 0), r.shapeOptions(seq)...)
	})
}

// enqueueMany enqueues the tasks newTask makes of seq [0, n) in batches of
// 1000 with cfg.Callers concurrent EnqueueBatch calls.
func (r *runner) enqueueMany(ctx context.Context, n int, newTask func(seq int) *conveyor.Task) error {
	var next atomic.Int64
	errs := make(chan error, r.cfg.Callers)
	var wg sync.WaitGroup
	for i := range r.cfg.Callers {
		client := r.producerClient(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			tasks := make([]*conveyor.Task, 0, batchSize)
			for {
				first := int(next.Add(batchSize)) - batchSize
				if first >= n || ctx.Err() != nil {
					return
				}
				tasks = tasks[:0]
				for seq := first; seq < min(first+batchSize, n); seq++ {
					tasks = append(tasks, newTask(seq))
				}
				res, err := client.EnqueueBatch(ctx, tasks)
				if err == nil {
					for _, br := range res {
						if br.Err != nil {
							err = br.Err
							break
						}
					}
				}
				if err == nil && len(res) > 0 {
					r.taskID.CompareAndSwap(nil, &res[0].Task.ID)
					r.acked.Add(int64(len(res)))
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	return stoppedEarly(ctx)
}

// stoppedEarly is the error of producers that stopped because ctx ended:
// the tasks after that were never sent, so no figure may count them.
func stoppedEarly(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("enqueue stopped before every task was sent: %w", err)
	}
	return nil
}

// otherQueue holds --prefill-other's tasks. No worker of the bench serves
// it: they stay PENDING for the whole run, the backlog of another
// application sharing the server.
const otherQueue = "bench-other"

// prefillOther tops otherQueue up to cfg.PrefillOther pending tasks before
// the workload, so that it runs against a store that holds them. A running
// server (--addr) may hold some from an earlier run: they count, or every
// run would add another N and the depth would grow from run to run.
func (r *runner) prefillOther(ctx context.Context) error {
	if r.cfg.PrefillOther <= 0 {
		return nil
	}
	q, err := r.queueInfo(ctx, otherQueue)
	if err != nil {
		return err
	}
	held := int(q.GetPending())
	if held > r.cfg.PrefillOther {
		return fmt.Errorf("queue %s of %s already holds %d pending tasks, more than --prefill-other %d",
			otherQueue, r.addr, held, r.cfg.PrefillOther)
	}
	if held > 0 {
		r.res.Settings["prefill_other"] += fmt.Sprintf(" (%d of them there before the run)", held)
	}
	n := r.cfg.PrefillOther - held
	t0 := time.Now()
	err = r.enqueueMany(ctx, n, func(seq int) *conveyor.Task {
		return conveyor.NewTask(benchType, payload(seq, 0), conveyor.Queue(otherQueue))
	})
	if err != nil {
		return fmt.Errorf("prefill %d tasks on %s: %w", n, otherQueue, err)
	}
	r.res.PrefillOtherS = time.Since(t0).Seconds()
	if r.srv != nil {
		r.res.PrefillRSSAnonMB = kbToMB(procStatusKB(r.srv.pid(), "RssAnon"))
	}
	return nil
}

func (r *runner) w1(ctx context.Context) (measured, error) {
	cpu := r.markCPU()
	t0 := time.Now()
	if err := r.enqueueBulk(ctx, r.cfg.N); err != nil {
		return measured{}, err
	}
	return measured{wall: time.Since(t0), count: r.cfg.N, cpu: cpu.since()}, nil
}

func (r *runner) w2(ctx context.Context) (measured, error) {
	var next atomic.Int64
	errs := make(chan error, r.cfg.Producers)
	var wg sync.WaitGroup
	cpu := r.markCPU()
	t0 := time.Now()
	for i := range r.cfg.Producers {
		client := r.producerClient(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				seq := int(next.Add(1)) - 1
				if seq >= r.cfg.N || ctx.Err() != nil {
					return
				}
				if _, err := client.Enqueue(ctx, benchType, payload(seq, mono()), r.shapeOptions(seq)...); err != nil {
					errs <- err
					return
				}
				r.acked.Add(1)
			}
		}()
	}
	wg.Wait()
	wall := time.Since(t0)
	close(errs)
	if err := <-errs; err != nil {
		return measured{}, err
	}
	if err := stoppedEarly(ctx); err != nil {
		return measured{}, err
	}
	return measured{wall: wall, count: r.cfg.N, cpu: cpu.since()}, nil
}

// startWorker runs an SDK worker with concurrency cfg.Concurrency on
// r.addr whose handler calls onStart with the task's seq first thing.
func (r *runner) startWorker(ctx context.Context, onStart func(seq int)) (stop func() error, err error) {
	return r.startWorkerAt(ctx, r.addr, r.label, onStart)
}

// startWorkerAt is startWorker on the server at addr, its session
// labelled label.
func (r *runner) startWorkerAt(ctx context.Context, addr, label string, onStart func(seq int)) (stop func() error, err error) {
	if r.cfg.Push {
		return r.startPushWorkerAt(ctx, addr, onStart)
	}
	if r.cfg.Shape == ShapeTyped {
		return r.startTypedWorkersAt(ctx, addr, label, onStart)
	}
	return r.startSDKWorkerAt(ctx, addr, label, benchType, r.cfg.Concurrency, onStart)
}

// startTypedWorkersAt starts the typed shape's workers: one per type,
// each with a handler for its type only, sharing cfg.Concurrency.
func (r *runner) startTypedWorkersAt(ctx context.Context, addr, label string, onStart func(seq int)) (stop func() error, err error) {
	var stops []func() error
	stopAll := func() error {
		var errs []error
		for _, s := range stops {
			errs = append(errs, s())
		}
		return errors.Join(errs...)
	}
	for i := range typedKinds {
		s, err := r.startSDKWorkerAt(ctx, addr, label, typedType(i), max(1, r.cfg.Concurrency/typedKinds), onStart)
		if err != nil {
			_ = stopAll()
			return nil, err
		}
		stops = append(stops, s)
	}
	return stopAll, nil
}

// startSDKWorkerAt starts one SDK worker of concurrency on addr with a
// handler for typ.
func (r *runner) startSDKWorkerAt(ctx context.Context, addr, label, typ string, concurrency int, onStart func(seq int)) (stop func() error, err error) {
	opts := []conveyor.WorkerOption{conveyor.WithQueue(benchQueue, 1), conveyor.WithConcurrency(concurrency),
		conveyor.WithLabels(map[string]string{runLabelKey: label})}
	if r.cfg.Token != "" {
		opts = append(opts, conveyor.WithToken(r.cfg.Token))
	}
	w, err := conveyor.NewWorker(addr, opts...)
	if err != nil {
		return nil, err
	}
	if r.cfg.Shape == ShapeGroups {
		w.HandleBatch(typ, conveyor.BatchHandlerFunc(func(_ context.Context, b *conveyor.DeliveryBatch) error {
			for _, d := range b.Tasks {
				onStart(payloadSeq(d.Payload))
			}
			return nil
		}))
	} else {
		w.HandleFunc(typ, func(_ context.Context, d *conveyor.Delivery) error {
			onStart(payloadSeq(d.Payload))
			return nil
		})
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	return sync.OnceValue(func() error {
		cancel()
		return <-done
	}), nil
}

// waitDone waits until the handlers saw n tasks (r.handled), then until
// the server reports n completed and none outstanding, then until all of
// that is on disk (GetTask reads the server's own writes: it waits for
// every change already made to be durable).
func (r *runner) waitDone(ctx context.Context, n int) (time.Time, error) {
	if r.cfg.waitTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.cfg.waitTimeout)
		defer cancel()
	}
	for r.handled.Load() < int64(n) {
		select {
		case <-ctx.Done():
			return time.Time{}, r.incomplete(ctx, n)
		case <-time.After(2 * time.Millisecond):
		}
	}
	admin := r.admin()
	for {
		res, err := admin.ListQueues(ctx, connect.NewRequest(&conveyorv1.ListQueuesRequest{}))
		if err == nil {
			for _, q := range res.Msg.GetQueues() {
				if q.GetName() != benchQueue {
					continue
				}
				notDone := q.GetPending() + q.GetActive() + q.GetRetry() + q.GetScheduled()
				if q.GetCompleted() >= int64(n) && notDone == 0 {
					return r.durable(ctx)
				}
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, r.incomplete(ctx, n)
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// incomplete is waitDone's error when ctx ended first: how far the run
// got, by the bench's counts and by the server's, read once more.
func (r *runner) incomplete(ctx context.Context, n int) error {
	got := fmt.Sprintf("%d of %d tasks acknowledged, %d handled", r.acked.Load(), n, r.handled.Load())
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if q, err := r.queueInfo(rctx, benchQueue); err != nil {
		got += fmt.Sprintf("; the server's counts unread (%v)", err)
	} else {
		completed := q.GetCompleted()
		r.completed.Store(&completed)
		got += fmt.Sprintf("; the server reports %d completed", completed)
		if rest := unfinished(q); rest != "" {
			got += ", " + rest
		}
	}
	return fmt.Errorf("%w: %s: %w", errIncomplete, got, ctx.Err())
}

// admin is an AdminService client of the server under test (the SDK has
// no admin client; the bench reads queue counts and sessions from it).
func (r *runner) admin() conveyorv1connect.AdminServiceClient {
	return adminAt(r.liveAddr(), r.cfg.Token)
}

func adminOptions(token string) []connect.ClientOption {
	opts := []connect.ClientOption{connect.WithGRPC()}
	if token != "" {
		opts = append(opts, connect.WithInterceptors(conveyor.TokenInterceptor(token)))
	}
	return opts
}

func (r *runner) w3(ctx context.Context) (measured, error) {
	if err := r.prepareShape(ctx); err != nil {
		return measured{}, err
	}
	if err := r.enqueueBulk(ctx, r.cfg.N); err != nil {
		return measured{}, fmt.Errorf("prefill: %w", err)
	}
	if r.cfg.KillLeaderAfter > 0 {
		r.failover = newFailoverWatch(r.cfg.N, 4*r.cfg.Nodes*r.cfg.Workers*r.cfg.Concurrency, r.nodeLiveness())
	}
	cpu := r.markCPU()
	t0 := time.Now()
	ws, err := r.startWorkers(ctx, r.onHandled)
	if err != nil {
		return measured{}, err
	}
	defer func() { _ = ws.stop() }()
	ended := make(chan struct{})
	var killed <-chan error
	if r.failover != nil {
		killed = r.killLeaderLater(ctx, ended, ws.on)
	}
	end, err := r.waitDone(ctx, r.cfg.N)
	close(ended)
	if killed != nil {
		if kerr := <-killed; err == nil {
			err = kerr
		}
		r.res.Failover = r.failover.result()
	}
	if err != nil {
		return measured{}, err
	}
	return measured{wall: end.Sub(t0), count: r.cfg.N, cpu: cpu.since()}, nil
}

func (r *runner) w4(ctx context.Context) (measured, error) {
	n := r.cfg.N
	returned := make([]int64, n)
	started := make([]int64, n)
	callStart := make([]int64, n)
	ws, err := r.startWorkers(ctx, func(seq int) {
		now := mono()
		if seq >= 0 && seq < n {
			atomic.StoreInt64(&started[seq], now)
		}
		r.handled.Add(1)
	})
	if err != nil {
		return measured{}, err
	}
	defer func() { _ = ws.stop() }()
	if err := ws.waitSessions(ctx); err != nil {
		return measured{}, err
	}

	jobs := make(chan int, n)
	errs := make(chan error, r.cfg.Producers)
	var wg sync.WaitGroup
	for i := range r.cfg.Producers {
		client := r.producerClient(i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := range jobs {
				s := mono()
				info, err := client.Enqueue(ctx, benchType, payload(seq, s), r.shapeOptions(seq)...)
				atomic.StoreInt64(&returned[seq], mono())
				if err == nil {
					r.taskID.CompareAndSwap(nil, &info.ID)
					r.acked.Add(1)
				}
				callStart[seq] = s
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	cpu := r.markCPU()
	t0 := time.Now()
	interval := time.Second / time.Duration(r.cfg.Rate)
	for sent := 0; sent < n && ctx.Err() == nil; {
		due := min(int(time.Since(t0)/interval)+1, n)
		for ; sent < due; sent++ {
			jobs <- sent
		}
		time.Sleep(200 * time.Microsecond)
	}
	close(jobs)
	wg.Wait()
	r.res.AchievedRate = float64(n) / time.Since(t0).Seconds()
	close(errs)
	if err := <-errs; err != nil {
		return measured{}, err
	}
	end, err := r.waitDone(ctx, n)
	if err != nil {
		return measured{}, err
	}
	st, rt := make([]int64, n), make([]int64, n) // written by handlers and producers
	for i := range n {
		st[i], rt[i] = atomic.LoadInt64(&started[i]), atomic.LoadInt64(&returned[i])
	}
	if err := r.res.setLatencies(st, rt, callStart); err != nil {
		return measured{}, err
	}
	return measured{wall: end.Sub(t0), count: n, cpu: cpu.since()}, nil
}

// setLatencies sets W4's latency figures from each task's handler start,
// its Enqueue call's return and its call's start (Unix ns): from the
// return to the handler (a handler that started first counts as 0, and in
// Negative), the call itself, and from the call's start to the handler.
func (res *Result) setLatencies(started, returned, callStart []int64) error {
	n := len(started)
	lat, enq, from := make([]float64, 0, n), make([]float64, 0, n), make([]float64, 0, n)
	for i, st := range started {
		rt := returned[i]
		if st == 0 || rt == 0 {
			return fmt.Errorf("task %d has no timestamps", i)
		}
		if st < rt {
			res.Negative++
		}
		lat = append(lat, max(float64(st-rt)/1e6, 0))
		enq = append(enq, float64(rt-callStart[i])/1e6)
		from = append(from, max(float64(st-callStart[i])/1e6, 0))
	}
	for _, xs := range [][]float64{lat, enq, from} {
		sort.Float64s(xs)
	}
	res.P50Ms, res.P99Ms, res.MaxMs = pct(lat, 50), pct(lat, 99), lat[n-1]
	res.EnqP50Ms, res.EnqP99Ms = pct(enq, 50), pct(enq, 99)
	res.FromCallP50Ms, res.FromCallP99Ms, res.FromCallMaxMs = pct(from, 50), pct(from, 99), from[n-1]
	return nil
}

func pct(sorted []float64, p float64) float64 {
	idx := min(max(int(float64(len(sorted))*p/100+0.5)-1, 0), len(sorted)-1)
	return sorted[idx]
}

// runMEM fills a fresh server with N pending tasks, reads its anonymous
// memory, restarts it on the same file and times the reopen.
func (r *runner) runMEM(ctx context.Context) error {
	if r.cfg.Addr != "" {
		return fmt.Errorf("MEM starts its own server; do not pass --addr")
	}
	dir, err := os.MkdirTemp("", "conveyor-bench-mem-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	args, dropDB, err := r.serverArgs()
	if err != nil {
		return err
	}
	defer dropDB()
	if r.srv, err = startServer(r.cfg.Binary, dir, args...); err != nil {
		return err
	}
	r.addr = r.srv.url
	if r.client, err = conveyor.NewClient(r.addr, r.connOptions()...); err != nil {
		return err
	}
	if err := r.prepareShape(ctx); err != nil {
		_ = r.srv.stop()
		return err
	}
	cpu := markCPU(r.srv.pid())
	t0 := time.Now()
	if err := r.enqueueBulk(ctx, r.cfg.N); err != nil {
		_ = r.srv.stop()
		return err
	}
	r.res.WallS = time.Since(t0).Seconds()
	r.res.TPS = float64(r.cfg.N) / r.res.WallS
	use := cpu.since()
	r.res.setCPU(use)
	r.res.ServerRSSAnonMB = kbToMB(procStatusKB(r.srv.pid(), "RssAnon"))
	r.res.ServerPeakRSSMB = kbToMB(procStatusKB(r.srv.pid(), "VmHWM"))
	if err := r.srv.stop(); err != nil {
		return fmt.Errorf("stop: %w", err)
	}

	if r.srv, err = startServer(r.cfg.Binary, dir, args...); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	defer func() { _ = r.srv.stop() }()
	r.res.ReopenS = r.srv.ready.Seconds()
	r.res.ReopenedRSSAnonMB = kbToMB(procStatusKB(r.srv.pid(), "RssAnon"))
	r.addr = r.srv.url
	if r.cfg.Shape != ShapePlain {
		return nil // its tasks wait (AGGREGATING, BLOCKED): nothing to dispatch
	}
	first := make(chan struct{})
	var once sync.Once
	stop, err := r.startWorker(ctx, func(int) { once.Do(func() { close(first) }) })
	if err != nil {
		return err
	}
	defer func() { _ = stop() }()
	select {
	case <-first:
		r.res.ReopenFirstDispatchMs = float64(time.Since(r.srv.started).Microseconds()) / 1000
	case <-ctx.Done():
		return fmt.Errorf("no dispatch after the reopen: %w", ctx.Err())
	}
	return nil
}

// durable waits until every change the server has made is on disk and
// returns the time it was.
func (r *runner) durable(ctx context.Context) (time.Time, error) {
	id := r.taskID.Load()
	if id == nil {
		return time.Time{}, fmt.Errorf("no task id to sync on")
	}
	if _, err := r.liveClient().GetTask(ctx, *id); err != nil {
		return time.Time{}, fmt.Errorf("sync: %w", err)
	}
	return time.Now(), nil
}

// runLabelKey is the worker label that marks the run's own workers.
const runLabelKey = "conveyor-bench-run"

// waitSession waits until the server lists the run's own worker session,
// so that W4's load does not start before it can take it. A running
// server (--addr) may list other applications' workers, which take none
// of the bench queue's tasks.
func (r *runner) waitSession(ctx context.Context) error {
	return r.waitSessionAt(ctx, r.addr, r.label)
}

// waitSessionAt waits until the server at addr lists the session labelled
// label.
func (r *runner) waitSessionAt(ctx context.Context, addr, label string) error {
	admin := adminAt(addr, r.cfg.Token)
	for {
		res, err := admin.ListWorkers(ctx, connect.NewRequest(&conveyorv1.ListWorkersRequest{}))
		if err == nil && slices.ContainsFunc(res.Msg.GetWorkers(), func(w *conveyorv1.WorkerInfo) bool {
			if r.cfg.Push {
				return w.GetSessionId() == pushSessionID
			}
			return w.GetLabels()[runLabelKey] == label
		}) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no worker session: %w", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
