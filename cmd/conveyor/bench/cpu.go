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
}

type cpuUse struct {
	machinePct, benchPct, serverPct float64
	// stealPct is CPU the hypervisor gave to other machines while this
	// one wanted it (counted in machinePct): runs with much of it measured
	// a slower machine than their neighbours did.
	stealPct float64
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
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseUint(f[11], 10, 64)
	st, _ := strconv.ParseUint(f[12], 10, 64)
	return ut + st
}

// setCPU records a run's CPU use in its result.
func (r *Result) setCPU(u cpuUse) {
	r.CPUMachinePct, r.CPUBenchPct, r.CPUServerPct, r.CPUStealPct = u.machinePct, u.benchPct, u.serverPct, u.stealPct
}
