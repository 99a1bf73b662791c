package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	"github.com/conveyor-dev/conveyor/internal/testwait"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
	"github.com/conveyor-dev/conveyor/server/servertest"
)

// The cluster tests run several `conveyor server --broker postgres`
// processes (nodes) on one database of their own, kill them with SIGKILL
// and restart them on the same address, and drive them with the Go SDK's
// real clients and workers. Like every PostgreSQL test they need
// CONVEYOR_TEST_DATABASE_URL, and fail (not skip) without it.

// clusterLiveness is the --node-liveness the nodes run with: short, so
// that a killed node's tasks come back, and a dead leader is replaced,
// within seconds.
const clusterLiveness = 3 * time.Second

// livenessWait bounds a wait for what a dead node leaves behind to be
// taken up by the others: its liveness lapsing, then the leader's sweep,
// then a dispatch, with room for a slow, busy machine.
func livenessWait() time.Duration { return clusterLiveness + 15*time.Second }

// cluster is the nodes of one test on one database, and the HTTP client
// every client and worker of the test connects with.
type cluster struct {
	t     *testing.T
	url   string       // the database
	hc    *http.Client // shared: one HTTP/2 connection per node
	nodes []*clusterNode
}

// clusterNode is one node: its address, kept across restarts, and its
// process while it runs.
type clusterNode struct {
	addr  string // host:port
	url   string // http://host:port
	child *childServer
	// starts and kills are when each run of the node began serving and
	// was killed, in order, on the test's clock.
	starts, kills []time.Time
}

// newCluster starts n nodes on a database of the test's own.
func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	conveyorBinary(t) // skipped under -short, before anything is set up
	c := &cluster{t: t, url: schemaURL(t), hc: servertest.HTTPClient()}
	t.Cleanup(c.hc.CloseIdleConnections)
	for range n {
		c.add()
	}
	return c
}

// add starts one more node, on a free loopback port, and returns its index.
func (c *cluster) add() int {
	c.t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		c.t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	c.nodes = append(c.nodes, &clusterNode{addr: addr, url: "http://" + addr})
	i := len(c.nodes) - 1
	c.restart(i)
	return i
}

// restart starts node i again, on its address, and waits until it serves.
func (c *cluster) restart(i int) {
	c.t.Helper()
	n := c.nodes[i]
	if n.child != nil {
		c.t.Fatalf("node %d is running", i)
	}
	n.child = startPostgresChild(c.t, c.url, n.addr, "--node-liveness", clusterLiveness.String())
	n.starts = append(n.starts, time.Now())
}

// kill kills node i with SIGKILL and waits until it is gone.
func (c *cluster) kill(i int) {
	c.t.Helper()
	n := c.nodes[i]
	if err := n.child.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	_ = n.child.cmd.Wait()
	n.kills = append(n.kills, time.Now())
	n.child = nil
}

// up returns the indexes of the nodes running.
func (c *cluster) up() []int {
	var out []int
	for i, n := range c.nodes {
		if n.child != nil {
			out = append(out, i)
		}
	}
	return out
}

func (c *cluster) admin(i int) conveyorv1connect.AdminServiceClient {
	return conveyorv1connect.NewAdminServiceClient(c.hc, c.nodes[i].url, connect.WithGRPC())
}

func (c *cluster) tasks(i int) conveyorv1connect.TaskServiceClient {
	return conveyorv1connect.NewTaskServiceClient(c.hc, c.nodes[i].url, connect.WithGRPC())
}

// client returns a Go SDK client of node i.
func (c *cluster) client(i int) *conveyor.Client {
	c.t.Helper()
	cl, err := conveyor.NewClient(c.nodes[i].url, conveyor.WithHTTPClient(c.hc))
	if err != nil {
		c.t.Fatal(err)
	}
	return cl
}

// worker starts a Go SDK worker on node i with the handlers register
// adds, and returns it running; the test's end closes it. It reconnects
// quickly, so that a restart of its node costs the test little time.
func (c *cluster) worker(i int, register func(*conveyor.Worker), opts ...conveyor.WorkerOption) *conveyor.Worker {
	c.t.Helper()
	opts = append([]conveyor.WorkerOption{
		conveyor.WithHTTPClient(c.hc),
		conveyor.WithReconnectBackoff(50*time.Millisecond, 500*time.Millisecond),
		conveyor.WithLogger(slog.New(slog.NewTextHandler(testLog{c.t}, &slog.HandlerOptions{Level: slog.LevelError}))),
	}, opts...)
	w, err := conveyor.NewWorker(c.nodes[i].url, opts...)
	if err != nil {
		c.t.Fatal(err)
	}
	register(w)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = w.Run(context.Background())
	}()
	c.t.Cleanup(func() {
		_ = w.Close()
		<-done
	})
	return w
}

// task returns task id as node i sees it, failing the test on an error.
func (c *cluster) task(i int, id string) *conveyorv1.TaskInfo {
	c.t.Helper()
	res, err := c.tasks(i).GetTask(context.Background(), connect.NewRequest(&conveyorv1.GetTaskRequest{Id: id}))
	if err != nil {
		c.t.Fatalf("get task %s on node %d: %v", id, i, err)
	}
	return res.Msg
}

// listTasks lists every task of queue as node i sees it, by id; nil when
// the node does not answer (it may be down).
func (c *cluster) listTasks(i int, queue string) map[string]*conveyorv1.TaskInfo {
	out := map[string]*conveyorv1.TaskInfo{}
	token := ""
	for {
		res, err := c.admin(i).ListTasks(context.Background(), connect.NewRequest(&conveyorv1.ListTasksRequest{
			Queue: queue, PageSize: 1000, PageToken: token}))
		if err != nil {
			return nil
		}
		for _, task := range res.Msg.GetTasks() {
			out[task.GetId()] = task
		}
		if token = res.Msg.GetNextPageToken(); token == "" {
			return out
		}
	}
}

// waitStates waits until every task in ids is in state want, as node i
// lists queue, and returns the listing. It lists at most every 100 ms:
// listing thousands of tasks is not free on a small machine.
func (c *cluster) waitStates(i int, queue string, ids []string, want conveyorv1.TaskState, within time.Duration) map[string]*conveyorv1.TaskInfo {
	c.t.Helper()
	var last map[string]*conveyorv1.TaskInfo
	behind := ids
	ok := false
	defer func() {
		if !ok {
			c.t.Logf("%d of %d tasks not %v; the first: %v", len(behind), len(ids), want, firstOf(last, behind))
		}
	}()
	testwait.Until(c.t, within, "every task "+want.String(), throttled(100*time.Millisecond, func() bool {
		if l := c.listTasks(i, queue); l != nil {
			last = l
		}
		behind = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return last[id].GetState() == want })
		return len(behind) == 0
	}))
	ok = true
	return last
}

// firstOf describes the first task of ids in listing, or says it is not
// there.
func firstOf(listing map[string]*conveyorv1.TaskInfo, ids []string) string {
	if len(ids) == 0 {
		return "none"
	}
	if task, ok := listing[ids[0]]; ok {
		return task.String()
	}
	return ids[0] + " missing"
}

// throttled calls cond at most once every d, answering false in between,
// for conditions too costly to check every few milliseconds.
func throttled(d time.Duration, cond func() bool) func() bool {
	var next time.Time
	return func() bool {
		if time.Now().Before(next) {
			return false
		}
		next = time.Now().Add(d)
		return cond()
	}
}

// clusterNodes returns the nodes GetClusterInfo on node i lists; nil when
// it does not answer.
func (c *cluster) clusterNodes(i int) []*conveyorv1.NodeInfo {
	res, err := c.admin(i).GetClusterInfo(context.Background(), connect.NewRequest(&conveyorv1.GetClusterInfoRequest{}))
	if err != nil {
		return nil
	}
	return res.Msg.GetNodes()
}

// leader returns the index of the node that leads now, or -1 when none
// does (or the nodes disagree). It asks GetClusterInfo of every running
// node when NodeInfo says which node leads (a bool field named leader);
// otherwise it reads the leader's row in the database.
func (c *cluster) leader() int {
	c.t.Helper()
	found := -1
	for _, i := range c.up() {
		for _, node := range c.clusterNodes(i) {
			if !node.GetLeader() {
				continue
			}
			j := c.nodeAt(node.GetAddress())
			if found >= 0 && j != found {
				return -1
			}
			found = j
		}
	}
	return found
}

// nodeAt returns the index of the node at addr, -1 if none.
func (c *cluster) nodeAt(addr string) int {
	for i, n := range c.nodes {
		if n.addr == addr {
			return i
		}
	}
	return -1
}
