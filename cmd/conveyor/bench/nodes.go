package bench

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	conveyorv1 "github.com/conveyor-dev/conveyor/gen/conveyor/v1"
	"github.com/conveyor-dev/conveyor/gen/conveyor/v1/conveyorv1connect"
	conveyor "github.com/conveyor-dev/conveyor/sdks/go"
)

// node is one of a run's fresh servers, with the client its producers use.
type node struct {
	proc   *serverProc
	url    string
	client *conveyor.Client
	// killed is set just before the bench SIGKILLs the node (failover):
	// from then on no call is sent to it.
	killed atomic.Bool
	// peakKB is the node's peak memory read just before it was killed.
	peakKB atomic.Int64
}

// cpu is the CPU the node's process used so far: read from /proc while it
// runs, from its exit status once it exited.
func (n *node) cpu() time.Duration {
	select {
	case <-n.proc.exited:
		if st := n.proc.cmd.ProcessState; st != nil {
			return st.UserTime() + st.SystemTime()
		}
		return 0
	default:
		return ticksToDuration(procTicks(n.proc.pid()))
	}
}

// peakRSSKB is the node's peak resident memory, kB.
func (n *node) peakRSSKB() int64 {
	if n.killed.Load() {
		return n.peakKB.Load()
	}
	return procStatusKB(n.proc.pid(), "VmHWM")
}

// checkNodes refuses the settings of several nodes that cannot run.
func checkNodes(c *Config) error {
	if c.Nodes <= 0 {
		c.Nodes = 1
	}
	switch {
	case c.Nodes > 1 && c.DatabaseURL == "":
		return fmt.Errorf("--nodes %d needs --database-url: several nodes share one PostgreSQL database", c.Nodes)
	case c.Nodes > 1 && c.Addr != "":
		return fmt.Errorf("--nodes starts its own servers; do not pass --addr")
	case c.Nodes > 1 && c.Workload == "MEM":
		return fmt.Errorf("MEM measures one server; --nodes does not apply")
	case c.Cross && (c.Workload != "W4" || c.Nodes < 2):
		return fmt.Errorf("--cross applies to W4 with --nodes 2 or more (got %s with --nodes %d)", c.Workload, c.Nodes)
	case c.NodeLiveness > 0 && c.Nodes < 2:
		return fmt.Errorf("--node-liveness applies to --nodes 2 or more")
	case c.KillLeaderAfter > 0 && ((c.Workload != "W3" && c.Workload != "SOAK") || c.Nodes < 2):
		return fmt.Errorf("--kill-leader-after applies to W3 and SOAK with --nodes 2 or more (got %s with --nodes %d)",
			c.Workload, c.Nodes)
	}
	return nil
}

// nodeLiveness is the --node-liveness the nodes get, or 0 for the
// server's default.
func (r *runner) nodeLiveness() time.Duration {
	if r.cfg.NodeLiveness > 0 {
		return r.cfg.NodeLiveness
	}
	if r.cfg.KillLeaderAfter > 0 {
		return failoverLiveness
	}
	return 0
}

// startNodes starts cfg.Nodes fresh servers, each on a temp data dir of
// its own and all on one fresh PostgreSQL schema when there is a
// database, waits until each lists them all, and points the runner at the
// first. done stops them and removes their data.
func (r *runner) startNodes(ctx context.Context) (done func(), err error) {
	args, dropDB, err := r.serverArgs()
	if err != nil {
		return func() {}, err
	}
	if l := r.nodeLiveness(); l > 0 {
		args = append(args, "--node-liveness", l.String())
		r.res.Settings["node_liveness"] = l.String()
	}
	var dirs []string
	done = func() {
		for _, n := range r.nodes {
			if !n.killed.Load() {
				_ = n.proc.stop()
			}
		}
		for _, d := range dirs {
			_ = os.RemoveAll(d)
		}
		dropDB()
	}
	for i := range r.cfg.Nodes {
		dir, err := os.MkdirTemp("", "conveyor-bench-")
		if err != nil {
			done()
			return func() {}, err
		}
		dirs = append(dirs, dir)
		p, err := startServer(r.cfg.Binary, dir, args...)
		if err != nil {
			done()
			if r.cfg.Nodes > 1 {
				err = fmt.Errorf("node %d: %w", i+1, err)
			}
			return func() {}, err
		}
		n := &node{proc: p, url: p.url}
		r.nodes = append(r.nodes, n)
		if n.client, err = conveyor.NewClient(n.url, r.connOptions()...); err != nil {
			done()
			return func() {}, err
		}
	}
	r.srv, r.addr, r.client = r.nodes[0].proc, r.nodes[0].url, r.nodes[0].client
	if r.cfg.Nodes > 1 {
		r.res.Settings["nodes"] = fmt.Sprint(r.cfg.Nodes)
		err := r.waitCluster(ctx)
		if err == nil {
			err = r.waitCrossDispatch(ctx)
		}
		if err != nil {
			done()
			return func() {}, err
		}
	}
	return done, nil
}

// waitCluster waits until GetClusterInfo on every node lists all the
// run's nodes, so that no load starts before the nodes see each other.
func (r *runner) waitCluster(ctx context.Context) error {
	for i, n := range r.nodes {
		admin := adminAt(n.url, r.cfg.Token)
		for {
			info, err := admin.GetClusterInfo(ctx, connect.NewRequest(&conveyorv1.GetClusterInfoRequest{}))
			if err == nil && len(info.Msg.GetNodes()) == len(r.nodes) {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("node %d does not list the %d nodes: %w", i+1, len(r.nodes), ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return nil
}

// producerNodes are the nodes producers call: the first alone with
// --cross, else all.
func (r *runner) producerNodes() []*node {
	if r.cfg.Cross {
		return r.nodes[:1]
	}
	return r.nodes
}

// workerNodes are the nodes workers connect to: all but the first with
// --cross, else all.
func (r *runner) workerNodes() []*node {
	if r.cfg.Cross {
		return r.nodes[1:]
	}
	return r.nodes
}

// producerClient is the client of producer (or caller) i: the producer
// nodes in turn, a live one in place of a killed one. A run on --addr has
// one client.
func (r *runner) producerClient(i int) *conveyor.Client {
	ps := r.producerNodes()
	if len(ps) == 0 {
		return r.client
	}
	n := ps[i%len(ps)]
	if n.killed.Load() {
		return r.liveNode().client
	}
	return n.client
}

// liveNode is the first node not killed, or nil on --addr.
func (r *runner) liveNode() *node {
	for _, n := range r.nodes {
		if !n.killed.Load() {
			return n
		}
	}
	return nil
}

// liveAddr is the address the bench reads the service at: a live node's,
// or --addr.
func (r *runner) liveAddr() string {
	if n := r.liveNode(); n != nil {
		return n.url
	}
	return r.addr
}

// liveClient is the client of liveAddr.
func (r *runner) liveClient() *conveyor.Client {
	if n := r.liveNode(); n != nil {
		return n.client
	}
	return r.client
}

// adminAt is an AdminService client of the server at addr.
func adminAt(addr, token string) conveyorv1connect.AdminServiceClient {
	return conveyorv1connect.NewAdminServiceClient(conveyor.H2CClient(), addr, adminOptions(token)...)
}
