//go:build unix && !linux

package harness

import "syscall"

// sysProcAttr puts the process in its own group; only Linux can also tie
// its life to the harness's.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
