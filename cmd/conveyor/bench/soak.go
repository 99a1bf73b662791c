package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// SOAK runs a production-like mix for cfg.Duration and samples the server
// every cfg.SampleEvery, to show that nothing it holds grows with time:
//
//   - producers enqueue open-loop at cfg.Rate: 70% plain tasks, 10%
//     scheduled 1-10 s ahead, 10% that fail their first attempt and are
//     retried a second later, 10% enqueued in EnqueueBatch calls of 50;
//   - a cron entry fires every second;
//   - two workers of concurrency cfg.Concurrency/2 drain the queue, and one
//     of them is stopped and replaced every minute (every quarter of a
//     shorter run): a worker reconnecting;
//   - every task is kept soakRetention after it completes, so the store
//     reaches a steady size within the warm-up.
//
// The run succeeds when every acknowledged task completed; the report
// says whether the server's memory, goroutines and file descriptors stayed
// flat after the warm-up.
const (
	soakRetention = time.Minute
	soakBatch     = 50
	// soakFlatPct is how much a sampled figure may move after the warm-up
	// and still count as flat.
	soakFlatPct = 10
)

// SoakReport is SOAK's result: the samples and what they say.
type SoakReport struct {
	WarmupS float64 `json:"warmup_s"`
	// RSS is the server's anonymous memory (RssAnon) when it runs here,
	// else its resident set from /metrics: bbolt's mapped file pages are
	// left out when they can be, since the page cache holds them, not the
	// server.
	RSS        SoakSeries `json:"rss_mb"`
	Goroutines SoakSeries `json:"goroutines"`
	FDs        SoakSeries `json:"fds"`
	// Flat is true when no series grew by more than soakFlatPct from the
	// warm-up's end to the load's end.
	Flat bool `json:"flat"`

	Enqueued   int64 `json:"enqueued"`
	Completed  int64 `json:"completed"`
	Retried    int64 `json:"retried"`
	Scheduled  int64 `json:"scheduled"`
	CronFires  int64 `json:"cron_fires"`
	Reconnects int64 `json:"reconnects"`

	Samples []SoakSample `json:"samples"`
}

// SoakSeries summarizes one sampled figure after the warm-up, while the
// load ran (verdictSamples). AfterWarmup and End are medians of soakWindow
// samples (the first after the warm-up, the last under load), so that one
// garbage collection or one burst of requests in flight does not decide
// the verdict.
type SoakSeries struct {
	AfterWarmup float64 `json:"after_warmup"`
	End         float64 `json:"end"`
	Min         float64 `json:"min"`
	Max         float64 `json:"max"`
	// GrowthPct is End-AfterWarmup as a percentage of AfterWarmup.
	GrowthPct float64 `json:"growth_pct"`
}

// soakWindow is how many samples each end of a series' verdict takes.
const soakWindow = 3

// SoakSample is the server at one moment of the run.
type SoakSample struct {
	AtS        float64 `json:"at_s"`
	RSSMB      float64 `json:"rss_mb"`
	Goroutines float64 `json:"goroutines"`
	FDs        float64 `json:"fds"`
	// Outstanding is how many acknowledged tasks have not completed yet.
	Outstanding int64 `json:"outstanding"`
	// UnderLoad is true for the samples taken while the producers ran
	// (the last one as they stopped), false for those of the drain after.
	UnderLoad bool `json:"under_load"`
}

// soak is one SOAK run's shared state.
type soak struct {
	r        *runner
	done     []atomic.Bool // by seq: completed
	failed   []atomic.Bool // by seq: a fail-once task's first attempt failed
	enqueued atomic.Int64
	complete atomic.Int64
	retried  atomic.Int64
	sched    atomic.Int64
	cron     atomic.Int64
	reconn   atomic.Int64
	errs     chan error
	// running maps the label of each running worker to the node it
	// holds its first session with (nil on r.addr); started counts them.
	wmu     sync.Mutex
	running map[string]*node
	started int

	mu      sync.Mutex
	batched []int // seqs of batch tasks waiting for soakBatch of them
}

func (r *runner) runSOAK(ctx context.Context) error {
	done, err := r.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	if err := r.requireIdleQueue(ctx); err != nil {
		return err
	}
	s := &soak{r: r, done: make([]atomic.Bool, r.cfg.N), failed: make([]atomic.Bool, r.cfg.N), errs: make(chan error, 16),
		running: map[string]*node{}}
	rep := &SoakReport{WarmupS: soakWarmup(r.cfg.Duration).Seconds()}
	r.res.Soak = rep

	cronID, err := s.createCron(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = s.deleteCron(cronID) }()

	runCtx, stopAll := context.WithCancel(ctx)
	defer stopAll()
	if r.cfg.KillLeaderAfter > 0 {
		r.failover = newFailoverWatch(r.cfg.N, 4*r.cfg.Concurrency+r.cfg.N/10, r.nodeLiveness())
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.workers(runCtx) })
	cpu := r.markCPU()
	t0 := time.Now()
	ended := make(chan struct{})
	var killed <-chan error
	if r.failover != nil {
		killed = r.killLeaderLater(runCtx, ended, s.on)
	}
	sampled := make(chan []SoakSample, 1)
	sampleCtx, stopSampling := context.WithCancel(runCtx)
	loadDone := make(chan struct{})
	go func() { sampled <- s.sample(sampleCtx, t0, loadDone) }()

	produceErr := s.produce(runCtx)
	close(loadDone)
	if produceErr == nil {
		produceErr = s.waitAll(runCtx)
	}
	close(ended)
	if killed != nil {
		if kerr := <-killed; produceErr == nil {
			produceErr = kerr
		}
		r.res.Failover = r.failover.result()
	}
	stopSampling()
	rep.Samples = <-sampled
	use := cpu.since()
	stopAll()
	wg.Wait()

	r.res.WallS = time.Since(t0).Seconds()
	r.res.TPS = float64(s.complete.Load()) / r.res.WallS
	r.res.setCPU(use)
	r.recordServers(use)
	rep.Enqueued, rep.Completed, rep.Retried = s.enqueued.Load(), s.complete.Load(), s.retried.Load()
	rep.Scheduled, rep.CronFires, rep.Reconnects = s.sched.Load(), s.cron.Load(), s.reconn.Load()
	rep.summarize()
	if r.srv != nil {
		r.res.ServerPeakRSSMB = kbToMB(procStatusKB(r.srv.pid(), "VmHWM"))
	}
	select {
	case err := <-s.errs:
		return err
	default:
	}
	return produceErr
}

// soakWarmup is the part of a run whose samples the verdict ignores: the
// store fills up to its steady size (a retention's worth of completed
// tasks) and the runtime sizes its heap.
func soakWarmup(d time.Duration) time.Duration {
	return max(min(d/6, 5*time.Minute), min(2*soakRetention, d/2))
}

// checkSoakSamples refuses a run too short for its sampling to reach a
// verdict: summarize needs 2*soakWindow samples after the warm-up, and
// without them the report would say "not flat" about a server it could
// not judge.
func checkSoakSamples(c *Config) error {
	warmup := soakWarmup(c.Duration)
	if n := int((c.Duration-warmup)/c.SampleEvery) + 1; n < 2*soakWindow {
		return fmt.Errorf("SOAK's verdict needs %d samples after the warm-up: --duration %s leaves %s after its %s warm-up, "+
			"%d samples at --sample-every %s; run longer or sample more often", 2*soakWindow, c.Duration, c.Duration-warmup,
			warmup, n, c.SampleEvery)
	}
	return nil
}

func (s *soak) fail(err error) {
	select {
	case s.errs <- err:
	default:
	}
}

// produce enqueues seq [0, N) open-loop at cfg.Rate.
func (s *soak) produce(ctx context.Context) error {
	r := s.r
	jobs := make(chan int, r.cfg.Producers*soakBatch)
	var wg sync.WaitGroup
	for range r.cfg.Producers {
		wg.Go(func() {
			for seq := range jobs {
				if err := s.enqueue(ctx, seq); err != nil {
					s.fail(err)
				}
			}
		})
	}
	t0 := time.Now()
	interval := time.Second / time.Duration(r.cfg.Rate)
	for sent := 0; sent < r.cfg.N && ctx.Err() == nil; {
		due := min(int(time.Since(t0)/interval)+1, r.cfg.N)
		for ; sent < due; sent++ {
			jobs <- sent
		}
		time.Sleep(time.Millisecond)
	}
	close(jobs)
	wg.Wait()
	if rest := s.takeRest(); len(rest) > 0 {
		if err := s.enqueueBatch(ctx, rest); err != nil {
			s.fail(err)
		}
	}
	return ctx.Err()
}

// takeBatch adds seq to the batch being collected and returns the batch
// once it is full.
func (s *soak) takeBatch(seq int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batched = append(s.batched, seq)
	if len(s.batched) < soakBatch {
		return nil
	}
	return s.takeLocked()
}

// takeRest returns the batch being collected, full or not.
func (s *soak) takeRest() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.takeLocked()
}

func (s *soak) takeLocked() []int {
	b := s.batched
	s.batched = nil
	return b
}

// soakOptions are every SOAK task's options.
func soakOptions() []conveyor.TaskOption {
	return []conveyor.TaskOption{conveyor.Queue(benchQueue), conveyor.Retention(soakRetention)}
}

// enqueue sends task seq the way its kind says: batch tasks wait for
// soakBatch of them and leave together.
func (s *soak) enqueue(ctx context.Context, seq int) error {
	opts := soakOptions()
	switch seq % 10 {
	case 7:
		opts = append(opts, conveyor.ProcessIn(time.Duration(1+seq/10%10)*time.Second))
		s.sched.Add(1)
	case 8:
		opts = append(opts, conveyor.MetadataKV("soak", "fail-once"), conveyor.MaxRetry(3),
			conveyor.RetryPolicy(conveyor.RetryStrategyFixed, time.Second, time.Second))
	case 9:
		if b := s.takeBatch(seq); b != nil {
			return s.enqueueBatch(ctx, b)
		}
		return nil
	}
	_, err := s.r.producerClient(seq).Enqueue(ctx, benchType, payload(seq, 0), opts...)
	if err != nil && s.r.failover != nil && s.r.failover.killAt.Load() > 0 {
		// Its node may be the killed one: once more on a live node. A
		// task the dead node committed runs twice; done counts it once.
		_, err = s.r.producerClient(seq).Enqueue(ctx, benchType, payload(seq, 0), opts...)
	}
	if err != nil {
		return fmt.Errorf("enqueue %d: %w", seq, err)
	}
	s.enqueued.Add(1)
	return nil
}

func (s *soak) enqueueBatch(ctx context.Context, seqs []int) error {
	tasks := make([]*conveyor.Task, len(seqs))
	for i, seq := range seqs {
		tasks[i] = conveyor.NewTask(benchType, payload(seq, 0), soakOptions()...)
	}
	res, err := s.r.producerClient(seqs[0]).EnqueueBatch(ctx, tasks)
	if err != nil && s.r.failover != nil && s.r.failover.killAt.Load() > 0 {
		res, err = s.r.producerClient(seqs[0]).EnqueueBatch(ctx, tasks) // as enqueue does
	}
	if err != nil {
		return fmt.Errorf("enqueue a batch from %d: %w", seqs[0], err)
	}
	for _, br := range res {
		if br.Err != nil {
			return fmt.Errorf("enqueue a batch from %d: %w", seqs[0], br.Err)
		}
	}
	s.enqueued.Add(int64(len(tasks)))
	return nil
}

// handle is the workers' handler: it records the task, and fails the
// first attempt of a fail-once task.
func (s *soak) handle(_ context.Context, d *conveyor.Delivery) error {
	if d.Metadata["conveyor-cron-id"] != "" {
		s.watch(-1)
		s.cron.Add(1)
		return nil
	}
	seq := payloadSeq(d.Payload)
	if d.Metadata["soak"] == "fail-once" {
		s.watch(-1) // started twice by design
	} else {
		s.watch(seq)
	}
	if seq < 0 || seq >= len(s.done) {
		return fmt.Errorf("soak: task %s has no seq of this run", d.ID)
	}
	if d.Metadata["soak"] == "fail-once" && d.Retried == 0 {
		if !s.failed[seq].Swap(true) {
			s.retried.Add(1)
		}
		return fmt.Errorf("soak: the first attempt of a fail-once task fails")
	}
	if !s.done[seq].Swap(true) {
		s.complete.Add(1)
	}
	return nil
}

// watch records a handler start in a failover run.
func (s *soak) watch(seq int) {
	if f := s.r.failover; f != nil {
		f.handled(seq)
	}
}

// workers runs two workers until ctx ends and replaces one of them every
// soakReconnectEvery. With several nodes, each new worker holds its first
// session with the next live node, and is given every node's URL
// (serversFrom) to move on to when that session ends.
func (s *soak) workers(ctx context.Context) {
	start := func() func() error {
		label, n := s.nextWorker()
		addr := s.r.addr
		if n != nil {
			addr = s.r.serversFrom(n)
		}
		w, err := s.newWorker(addr, label)
		if err != nil {
			s.fail(err)
			return func() error { return nil }
		}
		s.wmu.Lock()
		s.running[label] = n
		s.wmu.Unlock()
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- w.Run(wctx) }()
		return func() error {
			s.wmu.Lock()
			delete(s.running, label)
			s.wmu.Unlock()
			cancel()
			return <-done
		}
	}
	stable, rotating := start(), start()
	defer func() { _ = stable() }()
	t := time.NewTicker(min(time.Minute, s.r.cfg.Duration/4))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = rotating()
			return
		case <-t.C:
			if err := rotating(); err != nil && ctx.Err() == nil {
				s.fail(fmt.Errorf("stop a worker: %w", err))
			}
			rotating = start()
			s.reconn.Add(1)
		}
	}
}

// nextWorker is the label of the next worker to start and the live node
// it holds its first session with (with one server: none, and r.addr).
func (s *soak) nextWorker() (string, *node) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.started++
	label := fmt.Sprintf("%s-s%d", s.r.label, s.started)
	var live []*node
	for _, n := range s.r.workerNodes() {
		if !n.killed.Load() {
			live = append(live, n)
		}
	}
	if len(s.r.nodes) < 2 || len(live) == 0 {
		return "", nil // one server: no failover to watch, no label
	}
	return label, live[s.started%len(live)]
}

// on lists the labels of the running workers whose first session is with
// node k.
func (s *soak) on(k *node) []string {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	var labels []string
	for label, n := range s.running {
		if n == k {
			labels = append(labels, label)
		}
	}
	return labels
}

func (s *soak) newWorker(addr, label string) (*conveyor.Worker, error) {
	r := s.r
	opts := []conveyor.WorkerOption{conveyor.WithQueue(benchQueue, 1), conveyor.WithConcurrency(max(r.cfg.Concurrency/2, 1))}
	if label != "" {
		opts = append(opts, conveyor.WithLabels(map[string]string{runLabelKey: label}))
	}
	if r.cfg.Token != "" {
		opts = append(opts, conveyor.WithToken(r.cfg.Token))
	}
	w, err := conveyor.NewWorker(addr, opts...)
	if err != nil {
		return nil, err
	}
	w.HandleFunc(benchType, s.handle)
	return w, nil
}

func (s *soak) createCron(ctx context.Context) (string, error) {
	res, err := s.r.admin().CreateCron(ctx, connect.NewRequest(&conveyorv1.CreateCronRequest{Entry: &conveyorv1.CronEntry{
		Spec: "@every 1s", Queue: benchQueue, Type: benchType, Payload: payload(-1, 0),
		Options: &conveyorv1.TaskOptions{Retention: durationpb.New(soakRetention)},
	}}))
	if err != nil {
		return "", fmt.Errorf("create the cron entry: %w", err)
	}
	return res.Msg.GetId(), nil
}

func (s *soak) deleteCron(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.r.admin().DeleteCron(ctx, connect.NewRequest(&conveyorv1.DeleteCronRequest{Id: id}))
	return err
}

// waitAll waits until every acknowledged task completed (the scheduled
// ones are due within 10 s, the retried ones a second after failing).
func (s *soak) waitAll(ctx context.Context) error {
	deadline := time.Now().Add(time.Minute)
	for s.complete.Load() < s.enqueued.Load() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d acknowledged tasks completed a minute after the last enqueue",
				s.complete.Load(), s.enqueued.Load())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

// sample reads the server every cfg.SampleEvery until ctx ends, once when
// loadDone closes (the load's last moment), and once more at the end.
func (s *soak) sample(ctx context.Context, t0 time.Time, loadDone <-chan struct{}) []SoakSample {
	var out []SoakSample
	underLoad := true
	take := func() {
		sm, err := s.readServer()
		if err != nil {
			s.fail(fmt.Errorf("sample the server: %w", err))
			return
		}
		sm.AtS = time.Since(t0).Seconds()
		sm.Outstanding = s.enqueued.Load() - s.complete.Load()
		sm.UnderLoad = underLoad
		out = append(out, sm)
	}
	t := time.NewTicker(s.r.cfg.SampleEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			take()
			return out
		case <-loadDone:
			take()
			underLoad, loadDone = false, nil
		case <-t.C:
			take()
		}
	}
}

// readServer reads the server's memory, goroutines and descriptors: from
// /proc when it runs here, from its /metrics otherwise.
func (s *soak) readServer() (SoakSample, error) {
	m, err := s.scrape("conveyor_go_goroutines", "conveyor_process_open_fds", "conveyor_process_resident_memory_bytes")
	if err != nil {
		return SoakSample{}, err
	}
	sm := SoakSample{Goroutines: m["conveyor_go_goroutines"], FDs: m["conveyor_process_open_fds"],
		RSSMB: m["conveyor_process_resident_memory_bytes"] / (1 << 20)}
	if pid := s.r.serverPid(); pid > 0 {
		sm.RSSMB = kbToMB(procStatusKB(pid, "RssAnon"))
	}
	return sm, nil
}

// scrape reads the named samples of the server's /metrics, unlabelled or
// labelled with the node alone (a server on PostgreSQL labels every series
// with its node).
func (s *soak) scrape(names ...string) (map[string]float64, error) {
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(s.r.liveAddr(), "/")+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	if s.r.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.r.cfg.Token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = res.Body.Close() }()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", res.Status)
	}
	out, err := readSamples(res.Body, names)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("/metrics has no %s", n)
		}
	}
	return out, nil
}

// readSamples reads the named samples of a Prometheus text exposition,
// unlabelled or labelled with the node alone.
func readSamples(r io.Reader, names []string) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		series, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		name, labels, labelled := strings.Cut(series, "{")
		if labelled && (!strings.HasPrefix(labels, `node="`) || strings.Count(labels, "=") != 1) {
			continue
		}
		if !slices.Contains(names, name) {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// verdictSamples are the samples the verdict reads: those after the
// warm-up, taken while the load ran. The drain after it (up to a minute of
// a server winding down) would give a server that grew under load an end
// figure from after the load, and let it pass as flat.
func verdictSamples(samples []SoakSample, warmupS float64) []SoakSample {
	var out []SoakSample
	for _, sm := range samples {
		if sm.AtS >= warmupS && sm.UnderLoad {
			out = append(out, sm)
		}
	}
	return out
}

// summarize fills the series and the verdict from verdictSamples.
func (rep *SoakReport) summarize() {
	after := verdictSamples(rep.Samples, rep.WarmupS)
	if len(after) < 2*soakWindow {
		return // too short a run to say
	}
	series := func(get func(SoakSample) float64) SoakSeries {
		vals := make([]float64, len(after))
		for i, sm := range after {
			vals[i] = get(sm)
		}
		ser := SoakSeries{AfterWarmup: median(vals[:soakWindow]), End: median(vals[len(vals)-soakWindow:]),
			Min: slices.Min(vals), Max: slices.Max(vals)}
		if ser.AfterWarmup > 0 {
			ser.GrowthPct = (ser.End - ser.AfterWarmup) / ser.AfterWarmup * 100
		}
		return ser
	}
	rep.RSS = series(func(s SoakSample) float64 { return s.RSSMB })
	rep.Goroutines = series(func(s SoakSample) float64 { return s.Goroutines })
	rep.FDs = series(func(s SoakSample) float64 { return s.FDs })
	rep.Flat = rep.RSS.GrowthPct <= soakFlatPct && rep.Goroutines.GrowthPct <= soakFlatPct &&
		rep.FDs.GrowthPct <= soakFlatPct
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
