package harness

import "syscall"

// sysProcAttr puts the process in its own group, and has the kernel kill it
// should the harness die first (a test binary killed at its timeout, say).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
