package bench

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ on Linux.
const clockTicks = 100

// cpuMark is a point from which CPU use is measured: the whole machine's
// busy share (and the hypervisor's steal in it), this process's CPU and
// the server's.
type cpuMark struct {
	wall             time.Time
	busy, all, steal uint64
	self             time.Duration
	serverPid        int
	serverTicks      uint64
	machineCPUs      float64
	haveMachineCPU   bool
	// nodes and nodeCPU are the run's servers and their CPU at the mark,
	// pgTicks PostgreSQL's (havePG): set on PostgreSQL only (runner's
	// markCPU).
	nodes   []*node
	nodeCPU []time.Duration
	pgTicks uint64
	havePG  bool
}

type cpuUse struct {
	machinePct, benchPct, serverPct float64
	// stealPct is CPU the hypervisor gave to other machines while this
	// one wanted it (counted in machinePct): runs with much of it measured
	// a slower machine than their neighbours did.
	stealPct float64
	wall     time.Duration
	// nodes is each server's CPU over the run, pg PostgreSQL's (havePG).
	nodes  []time.Duration
	pg     time.Duration
	havePG bool
}

func markCPU(serverPid int) cpuMark {
	busy, all, steal, ok := machineJiffies()
	return cpuMark{wall: time.Now(), busy: busy, all: all, steal: steal, haveMachineCPU: ok, self: selfCPU(),
		serverPid: serverPid, serverTicks: procTicks(serverPid), machineCPUs: float64(runtime.NumCPU())}
}

func (m cpuMark) since() cpuUse {
	var u cpuUse
	wall := time.Since(m.wall)
	if busy, all, steal, ok := machineJiffies(); ok && m.haveMachineCPU && all > m.all {
		u.machinePct = 100 * m.machineCPUs * float64(busy-m.busy) / float64(all-m.all)
		u.stealPct = 100 * m.machineCPUs * float64(steal-m.steal) / float64(all-m.all)
	}
	u.wall = wall
	for i, n := range m.nodes {
		u.nodes = append(u.nodes, n.cpu()-m.nodeCPU[i])
	}
	if m.havePG {
		if t, ok := postgresTicks(); ok && t >= m.pgTicks {
			u.pg, u.havePG = ticksToDuration(t-m.pgTicks), true
		}
	}
	if wall > 0 {
		u.benchPct = 100 * float64(selfCPU()-m.self) / float64(wall)
		if m.serverPid > 0 {
			u.serverPct = 100 * float64(procTicks(m.serverPid)-m.serverTicks) / clockTicks / wall.Seconds()
		}
	}
	return u
}

// machineJiffies returns the busy, total and stolen jiffies of all CPUs.
func machineJiffies() (busy, all, steal uint64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return parseCPULine(line)
}

// parseCPULine reads /proc/stat's first line, "cpu user nice system idle
// iowait irq softirq steal guest guest_nice", as the peer harness does:
// busy is every field but idle and iowait, steal is counted in it.
func parseCPULine(line string) (busy, all, steal uint64, ok bool) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, 0, false
	}
	var v [10]uint64
	for i := 1; i < len(f) && i <= 10; i++ {
		v[i-1], _ = strconv.ParseUint(f[i], 10, 64)
	}
	for _, x := range v {
		all += x
	}
	idle := v[3] + v[4]
	return all - idle, all, v[7], true
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procTicks is utime+stime of pid in clock ticks.
func procTicks(pid int) uint64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	_, own, _, _ := parseStat(string(b))
	return own
}

// parseStat reads a /proc/<pid>/stat line: the command name, its own CPU
// (utime+stime) and its waited-for children's (cutime+cstime), in clock
// ticks. The name is between the first '(' and the last ')': it may hold
// either.
func parseStat(s string) (comm string, own, children uint64, ok bool) {
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", 0, 0, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 15 {
		return "", 0, 0, false
	}
	var v [4]uint64
	for i := range v {
		v[i], _ = strconv.ParseUint(f[11+i], 10, 64)
	}
	return s[open+1 : end], v[0] + v[1], v[2] + v[3], true
}

// postgresTicks is the CPU, in clock ticks, of every process of this
// machine named postgres: the whole PostgreSQL cluster (every cluster,
// were there several), whichever database its work was for. Each
// process's children's CPU counts too: the postmaster collects a backend's
// when it exits, so a connection closed between two readings is counted
// once, in the postmaster's, and not lost.
func postgresTicks() (uint64, bool) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, false
	}
	var sum uint64
	found := false
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited since ReadDir
		}
		if comm, own, children, ok := parseStat(string(b)); ok && comm == "postgres" {
			sum += own + children
			found = true
		}
	}
	return sum, found
}

func ticksToDuration(t uint64) time.Duration { return time.Duration(t) * time.Second / clockTicks }

// markCPU marks the CPU of the machine, the bench and the first server
// and, on PostgreSQL, of every server and of PostgreSQL.
func (r *runner) markCPU() cpuMark {
	m := markCPU(r.serverPid())
	if r.cfg.DatabaseURL != "" && len(r.nodes) > 0 {
		m.nodes = r.nodes
		for _, n := range r.nodes {
			m.nodeCPU = append(m.nodeCPU, n.cpu())
		}
		m.pgTicks, m.havePG = postgresTicks()
	}
	return m
}

// CPUFigure is CPU used over a run.
type CPUFigure struct {
	Seconds float64 `json:"cpu_s"`
	// Pct is Seconds over the run's wall time in percent of one core, as
	// cpu_server_pct: 150 is one and a half cores.
	Pct float64 `json:"cpu_pct"`
}

func cpuFigure(used, wall time.Duration) CPUFigure {
	f := CPUFigure{Seconds: used.Seconds()}
	if wall > 0 {
		f.Pct = 100 * used.Seconds() / wall.Seconds()
	}
	return f
}

// ServerUse is one fresh server's use over a run.
type ServerUse struct {
	// Node is the address the server listened on.
	Node string `json:"node"`
	CPUFigure
	PeakRSSMB float64 `json:"peak_rss_mb"`
	// Killed is set on the node --kill-leader-after killed: its figures
	// end there.
	Killed bool `json:"killed,omitempty"`
}

// recordServers records each server's and PostgreSQL's CPU of u (on
// PostgreSQL only), and the servers' peak memory. With several servers,
// cpu_server_pct becomes their sum and server_peak_rss_mb their largest.
func (r *runner) recordServers(u cpuUse) {
	if len(u.nodes) == 0 {
		return
	}
	var sum time.Duration
	for i, n := range r.nodes {
		r.res.Servers = append(r.res.Servers, ServerUse{Node: strings.TrimPrefix(n.url, "http://"),
			CPUFigure: cpuFigure(u.nodes[i], u.wall), PeakRSSMB: kbToMB(n.peakRSSKB()), Killed: n.killed.Load()})
		sum += u.nodes[i]
	}
	if len(r.nodes) > 1 {
		r.res.CPUServerPct = cpuFigure(sum, u.wall).Pct
		for _, s := range r.res.Servers {
			r.res.ServerPeakRSSMB = max(r.res.ServerPeakRSSMB, s.PeakRSSMB)
		}
	}
	if u.havePG {
		f := cpuFigure(u.pg, u.wall)
		r.res.CPUPostgres = &f
	}
}

// setCPU records a run's CPU use in its result.
func (r *Result) setCPU(u cpuUse) {
	r.CPUMachinePct, r.CPUBenchPct, r.CPUServerPct, r.CPUStealPct = u.machinePct, u.benchPct, u.serverPct, u.stealPct
}
