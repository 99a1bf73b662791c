package bench

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal has the kernel send the server SIGKILL when the
// bench dies (see launch for which thread counts). SIGKILL, not SIGTERM:
// the server is a throwaway on a temp dir nobody reopens, and bbolt needs
// no clean close to stay sound, so a graceful shutdown, which waits for
// requests and sessions to drain, buys nothing and could keep it alive.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
