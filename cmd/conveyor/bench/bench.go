package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// Config selects one benchmark run.
type Config struct {
	// Workload is W1, W2, W3, W4, MEM or SOAK.
	Workload string
	// N is the task count. Defaults: W1, W3 100,000; W2 20,000; W4
	// Rate*Duration; MEM 1,000,000.
	N int
	// Addr is a running server to use. Empty starts a fresh server process
	// (Binary, a temp data dir, loopback) for the run and stops it after.
	Addr string
	// Token is the bearer token for Addr.
	Token string
	// Binary is the conveyor binary to start. Defaults to this executable.
	Binary string
	// Callers is how many EnqueueBatch calls run at once (W1, prefills).
	// Defaults to 2.
	Callers int
	// Producers is how many goroutines enqueue (W2, W4). Defaults to 32.
	Producers int
	// Concurrency is the worker's concurrency (W3, W4). Defaults to 64.
	Concurrency int
	// Workers is how many workers (sessions) of Concurrency each serve the
	// queue on each server (W3, W4). Defaults to 1.
	Workers int
	// Rate is the open-loop enqueue rate of W4 and SOAK, tasks/s. Defaults
	// to 2000 (W4) and 500 (SOAK).
	Rate int
	// Duration is how long W4 and SOAK enqueue. Defaults to 10s (W4) and
	// 30 minutes (SOAK).
	Duration time.Duration
	// PrefillOther is how many pending tasks are put on another queue
	// (no worker serves it) before W1-W4 start: the workload then runs
	// against a store that already holds them.
	PrefillOther int
	// SampleEvery is how often SOAK samples the server. Defaults to 10s.
	SampleEvery time.Duration
	// Protocol is the SDK's wire format. Defaults to gRPC.
	Protocol conveyor.Protocol
	// Unbatched turns the SDK's enqueue batching off: every Enqueue call is
	// one RPC, the path of every client but the Go SDK (W2, W4).
	Unbatched bool
	// HTTP1 sends the producers' calls over HTTP/1.1 keep-alive
	// connections, as curl does, instead of HTTP/2 streams on one
	// connection. It needs the Connect protocol (gRPC needs HTTP/2);
	// workers keep HTTP/2, which their sessions need.
	HTTP1 bool
	// Shape is what the tasks are besides plain (shapes.go): keys, groups
	// or blocked. Empty: plain.
	Shape string
	// Push has W3 and W4 worked by a push endpoint (push.go) instead of a
	// session: the Go SDK's PushHandler on loopback, of concurrency
	// Concurrency, signed with PushSecret.
	Push bool
	// PushSecret signs the pushes (whsec_...). With a fresh server, empty
	// makes one up; with Addr, it must be one of that server's.
	PushSecret string
	// Keys is the number of concurrency keys of shape keys. Defaults to
	// 1,000.
	Keys int
	// GroupSize is the members per group of shape groups. Defaults to 100.
	GroupSize int
	// DatabaseURL, when set, runs the fresh server on PostgreSQL, in a
	// schema of its own in this database (dropped after the run), instead
	// of the embedded engine.
	DatabaseURL string
	// Nodes is how many fresh servers the run starts on one PostgreSQL
	// schema (more than one needs DatabaseURL). Producers and workers are
	// spread over them in turn. Defaults to 1.
	Nodes int
	// Cross puts W4's producers on the first node only and its workers on
	// the other nodes only (needs Nodes >= 2): every task crosses nodes
	// between its enqueue and its dispatch.
	Cross bool
	// KillLeaderAfter, when set (W3 and SOAK with Nodes >= 2), SIGKILLs the
	// node GetClusterInfo names leader this long after the workers start,
	// and records the failover (Result.Failover). The nodes then run with
	// a node liveness of failoverLiveness unless NodeLiveness is set.
	KillLeaderAfter time.Duration
	// NodeLiveness is the nodes' --node-liveness when Nodes > 1. Zero: the
	// server's default (15s), or failoverLiveness with KillLeaderAfter.
	NodeLiveness time.Duration
	// Run is the run index recorded in the result.
	Run int
	// Timeout bounds the run. Defaults to 10 minutes.
	Timeout time.Duration

	// waitTimeout, set by tests, bounds W3's and W4's wait for their tasks
	// to complete, within Timeout.
	waitTimeout time.Duration
}

func (c *Config) setDefaults() error {
	c.Workload = strings.ToUpper(c.Workload)
	if c.Callers <= 0 {
		c.Callers = 2
	}
	if c.Producers <= 0 {
		c.Producers = 32
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 64
	}
	if c.Workers <= 0 {
		c.Workers = 1
	}
	if c.Rate <= 0 {
		c.Rate = 2000
		if c.Workload == "SOAK" {
			c.Rate = 500
		}
	}
	if c.Duration <= 0 {
		c.Duration = 10 * time.Second
		if c.Workload == "SOAK" {
			c.Duration = 30 * time.Minute
		}
	}
	if c.SampleEvery <= 0 {
		c.SampleEvery = 10 * time.Second
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Minute
		if c.Workload == "SOAK" {
			c.Timeout = c.Duration + 10*time.Minute
		}
	}
	if c.Keys <= 0 {
		c.Keys = 1000
	}
	if c.GroupSize <= 0 {
		c.GroupSize = 100
	}
	if c.Binary == "" && c.Addr == "" {
		bin, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find the conveyor binary: %w", err)
		}
		c.Binary = bin
	}
	if c.N <= 0 {
		switch c.Workload {
		case "W1", "W3":
			c.N = 100_000
		case "W2":
			c.N = 20_000
		case "W4", "SOAK":
			c.N = int(float64(c.Rate) * c.Duration.Seconds())
		case "MEM":
			c.N = 1_000_000
		}
	}
	if err := c.checkPush(); err != nil {
		return err
	}
	switch {
	case c.Workers > 1 && c.Workload != "W3" && c.Workload != "W4":
		return fmt.Errorf("--workers applies to W3 and W4, not %s", c.Workload)
	case c.Workers > 1 && c.Push:
		return fmt.Errorf("--workers starts sessions; with --push one endpoint works the queue")
	}
	if c.HTTP1 && c.Protocol != conveyor.ProtocolConnect {
		return fmt.Errorf("--http1 needs --protocol connect: gRPC runs only over HTTP/2")
	}
	if err := checkNodes(c); err != nil {
		return err
	}
	if c.PrefillOther > 0 && (c.Workload == "MEM" || c.Workload == "SOAK") {
		return fmt.Errorf("--prefill-other applies to W1, W2, W3 and W4, not %s", c.Workload)
	}
	switch c.Workload {
	case "W1", "W2", "W3", "W4", "MEM":
		return checkShape(c)
	case "SOAK":
		if c.Shape != ShapePlain {
			return fmt.Errorf("SOAK runs its own mix of tasks; --shape does not apply")
		}
		return checkSoakSamples(c)
	}
	return fmt.Errorf("unknown workload %q: want W1, W2, W3, W4, MEM or SOAK", c.Workload)
}

// Result is one run's JSON line. The field names are the shared harness's.
type Result struct {
	Peer     string  `json:"peer"`
	Label    string  `json:"label"`
	Workload string  `json:"workload"`
	Run      int     `json:"run"`
	N        int     `json:"n"`
	OK       bool    `json:"ok"`
	Err      string  `json:"err,omitempty"`
	WallS    float64 `json:"wall_s"`
	TPS      float64 `json:"tasks_per_s"`
	P50Ms    float64 `json:"p50_ms,omitempty"`
	P99Ms    float64 `json:"p99_ms,omitempty"`
	MaxMs    float64 `json:"max_ms,omitempty"`
	// Negative counts W4's tasks whose handler started before their
	// Enqueue call returned (their latency counts as 0), as the harness's
	// field of that name does.
	Negative int `json:"negative_latency_count,omitempty"`

	AchievedRate float64 `json:"achieved_enqueue_rate,omitempty"`
	EnqP50Ms     float64 `json:"enqueue_call_p50_ms,omitempty"`
	EnqP99Ms     float64 `json:"enqueue_call_p99_ms,omitempty"`
	// FromCall* are W4's latencies from the Enqueue call's start to the
	// handler's start (never negative), as the harness reports them.
	FromCallP50Ms float64 `json:"from_call_start_p50_ms,omitempty"`
	FromCallP99Ms float64 `json:"from_call_start_p99_ms,omitempty"`
	FromCallMaxMs float64 `json:"from_call_start_max_ms,omitempty"`

	BenchPeakRSSMB  float64 `json:"bench_peak_rss_mb"`
	ServerPeakRSSMB float64 `json:"server_peak_rss_mb,omitempty"`
	CPUMachinePct   float64 `json:"cpu_machine_pct"`
	CPUBenchPct     float64 `json:"cpu_bench_pct"`
	CPUServerPct    float64 `json:"cpu_server_pct,omitempty"`
	CPUStealPct     float64 `json:"cpu_steal_pct"`
	// Servers is each fresh server's use over the run, in node order, when
	// the run is on PostgreSQL (with several nodes, cpu_server_pct is
	// their sum and server_peak_rss_mb their largest).
	Servers []ServerUse `json:"servers,omitempty"`
	// CPUPostgres is PostgreSQL's CPU over the run, when it runs on it:
	// every process of this machine named postgres, so the whole cluster
	// (other databases' load included), not the bench's schema alone.
	CPUPostgres *CPUFigure `json:"cpu_postgres,omitempty"`
	// Failover is what --kill-leader-after measured.
	Failover *Failover `json:"failover,omitempty"`

	// MEM only: the server's anonymous memory holding N pending tasks, and
	// how long a restart takes to reopen them ready to dispatch.
	ServerRSSAnonMB       float64 `json:"server_rss_anon_mb,omitempty"`
	ReopenS               float64 `json:"reopen_s,omitempty"`
	ReopenedRSSAnonMB     float64 `json:"reopened_rss_anon_mb,omitempty"`
	ReopenFirstDispatchMs float64 `json:"reopen_first_dispatch_ms,omitempty"`

	// --prefill-other: how long putting the other queue's tasks took, and
	// the server's anonymous memory holding them before the workload.
	PrefillOtherS    float64 `json:"prefill_other_s,omitempty"`
	PrefillRSSAnonMB float64 `json:"prefill_rss_anon_mb,omitempty"`

	// SOAK only: the server sampled over the run, and the verdict.
	Soak *SoakReport `json:"soak,omitempty"`

	// Progress is how far a failed run got (set only when it failed).
	Progress *Progress `json:"progress,omitempty"`

	Settings settings `json:"settings"`
	Started  string   `json:"started"`
}

// Progress is how far a run got before it failed (a timeout, most often).
type Progress struct {
	// Acked is how many tasks the server acknowledged: their enqueue call
	// returned success (W1-W4, MEM and the prefills).
	Acked int64 `json:"acked"`
	// Handled is how many tasks the run's workers were handed (W3, W4).
	Handled int64 `json:"handled"`
	// Completed is the bench queue's completed count as the server
	// reported it when the wait for completion gave up (W3, W4); absent
	// when the run failed elsewhere or the server could not be read.
	Completed *int64 `json:"completed,omitempty"`
}

// settings describes how a result was measured.
type settings map[string]string

// engine records the storage engine the server ran on, and what an
// acknowledged enqueue waited for there.
func (s settings) engine(name string) {
	if name == "bbolt" { // GetBrokerInfo's name of the embedded engine
		name = "bolt"
	}
	s["broker"] = name
	switch name {
	case "bolt":
		s["durability"] = "fsync per group commit (bbolt)"
	case "postgres":
		s["durability"] = "PostgreSQL commit per transaction (the server's synchronous_commit)"
	default:
		delete(s, "durability")
	}
}

// Run runs one workload and returns its result; the result's OK and Err
// say whether it succeeded.
func Run(ctx context.Context, cfg Config) Result {
	// A refused configuration's line still names its workload.
	res := Result{Peer: "conveyor", Label: "conveyor", Workload: strings.ToUpper(cfg.Workload), Run: cfg.Run,
		Started: time.Now().UTC().Format(time.RFC3339)}
	if err := cfg.setDefaults(); err != nil {
		res.Err = err.Error()
		return res
	}
	res.Workload, res.N = cfg.Workload, cfg.N
	res.Settings = map[string]string{
		"go": runtime.Version(), "gomaxprocs": fmt.Sprint(runtime.GOMAXPROCS(0)),
		"protocol": cfg.Protocol.String(), "callers": fmt.Sprint(cfg.Callers),
		"producers": fmt.Sprint(cfg.Producers), "concurrency": fmt.Sprint(cfg.Concurrency),
	}
	res.Settings.engine("bolt")
	if cfg.DatabaseURL != "" {
		res.Settings.engine("postgres")
	}
	// Batching decides what an enqueue costs (W2: about 2x): a line must say
	// which path it measured.
	res.Settings["enqueue_batching"] = "on (the SDK's default: concurrent calls share an RPC)"
	if cfg.Unbatched {
		res.Settings["enqueue_batching"] = "off (one RPC per Enqueue)"
	}
	if cfg.HTTP1 {
		res.Settings["transport"] = "HTTP/1.1 keep-alive"
	}
	if cfg.PrefillOther > 0 {
		res.Settings["prefill_other"] = fmt.Sprintf("%d pending tasks on queue %s", cfg.PrefillOther, otherQueue)
	}
	switch cfg.Shape {
	case ShapeKeys:
		res.Settings["shape"] = fmt.Sprintf("keys: %d concurrency keys, limit 1", cfg.Keys)
	case ShapeGroups:
		res.Settings["shape"] = fmt.Sprintf("groups of %d", cfg.GroupSize)
	case ShapeBlocked:
		res.Settings["shape"] = "blocked on one parent"
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	r := &runner{cfg: cfg, res: &res, label: fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())}
	err := r.run(ctx)
	res.BenchPeakRSSMB = kbToMB(procStatusKB(0, "VmHWM"))
	if err != nil {
		res.Err = err.Error()
		res.Progress = &Progress{Acked: r.acked.Load(), Handled: r.handled.Load(), Completed: r.completed.Load()}
	}
	res.OK = err == nil
	return res
}

// WriteJSON prints r as one JSON line.
func WriteJSON(w io.Writer, r Result) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

type runner struct {
	cfg Config
	res *Result
	srv *serverProc
	// nodes are the run's fresh servers (srv is the first), none on
	// --addr.
	nodes  []*node
	addr   string
	client *conveyor.Client
	// taskID is some enqueued task's id, for GetTask.
	taskID atomic.Pointer[string]
	// parent is the task the blocked shape's tasks depend on.
	parent string
	// label tells the run's own workers from others a running server lists.
	label string
	// acked counts the tasks whose enqueue the server acknowledged, and
	// handled those the run's workers were handed; completed is the
	// server's count when waitDone gave up. A failed run reports them.
	acked, handled atomic.Int64
	completed      atomic.Pointer[int64]
	// failover records --kill-leader-after's kill, nil without it.
	failover *failoverWatch
}

func (r *runner) run(ctx context.Context) error {
	if r.cfg.Workload == "MEM" {
		return r.runMEM(ctx)
	}
	if r.cfg.Workload == "SOAK" {
		return r.runSOAK(ctx)
	}
	done, err := r.connect(ctx)
	if err != nil {
		return err
	}
	defer done()
	if r.cfg.Workload == "W3" || r.cfg.Workload == "W4" {
		if err := r.requireIdleQueue(ctx); err != nil {
			return err
		}
	}
	if err := r.prefillOther(ctx); err != nil {
		return err
	}
	var m measured
	switch r.cfg.Workload {
	case "W1":
		m, err = r.w1(ctx)
	case "W2":
		m, err = r.w2(ctx)
	case "W3":
		m, err = r.w3(ctx)
	case "W4":
		m, err = r.w4(ctx)
	}
	if r.srv != nil {
		r.res.ServerPeakRSSMB = kbToMB(procStatusKB(r.srv.pid(), "VmHWM"))
	}
	if err != nil {
		return err
	}
	r.res.WallS = m.wall.Seconds()
	r.res.TPS = float64(m.count) / m.wall.Seconds()
	r.res.setCPU(m.cpu)
	r.recordServers(m.cpu)
	return nil
}

// connect points the runner at cfg.Addr, or at cfg.Nodes fresh server
// processes on temp data dirs (startNodes), and makes its client. done
// stops those servers and removes their data.
func (r *runner) connect(ctx context.Context) (done func(), err error) {
	if r.cfg.Addr == "" {
		return r.startNodes(ctx)
	}
	r.addr = r.cfg.Addr
	if r.client, err = conveyor.NewClient(r.addr, r.connOptions()...); err != nil {
		return func() {}, err
	}
	r.labelEngine()
	return func() {}, nil
}

// labelEngine reads the engine of the running server (--addr), whose
// durability the result's settings then describe.
func (r *runner) labelEngine() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := r.admin().GetBrokerInfo(ctx, connect.NewRequest(&conveyorv1.GetBrokerInfoRequest{}))
	if err != nil {
		r.res.Settings["broker"] = "unknown (GetBrokerInfo: " + err.Error() + ")"
		delete(r.res.Settings, "durability")
		return
	}
	r.res.Settings.engine(info.Msg.GetEngine())
}

func (r *runner) connOptions() []conveyor.Option {
	opts := []conveyor.Option{conveyor.WithProtocol(r.cfg.Protocol)}
	if r.cfg.Unbatched {
		opts = append(opts, conveyor.WithEnqueueBatching(false))
	}
	if r.cfg.Token != "" {
		opts = append(opts, conveyor.WithToken(r.cfg.Token))
	}
	if r.cfg.HTTP1 {
		// One idle connection kept per producer, so that no call waits to
		// dial; Go's default keeps two.
		t := &http.Transport{MaxIdleConnsPerHost: r.cfg.Producers + r.cfg.Callers}
		opts = append(opts, conveyor.WithHTTPClient(&http.Client{Transport: t}))
	}
	return opts
}

// serverPid is the server's process: the first live node's with several.
func (r *runner) serverPid() int {
	if n := r.liveNode(); n != nil {
		return n.proc.pid()
	}
	if r.srv == nil {
		return 0
	}
	return r.srv.pid()
}

type measured struct {
	wall  time.Duration
	count int
	cpu   cpuUse
}

var errIncomplete = errors.New("not every task completed")
