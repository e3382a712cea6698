package harness

// What a process costs, read from /proc by pid: the bench and the fleet
// harness measure etcd, kube-apiserver and the operators they run this way,
// so that the measuring process's own work is never counted.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// MemStatus is the memory part of /proc/<pid>/status, in KiB.
type MemStatus struct {
	RSS, HWM, Anon, File, Threads int64
}

// ProcStatus reads VmRSS, VmHWM, RssAnon, RssFile (KiB) and Threads of pid
// from /proc/<pid>/status.
func ProcStatus(pid int) (MemStatus, error) {
	var m MemStatus
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(strings.Fields(v + " 0")[0], 10, 64)
		switch k {
		case "VmRSS":
			m.RSS = n
		case "VmHWM":
			m.HWM = n
		case "RssAnon":
			m.Anon = n
		case "RssFile":
			m.File = n
		case "Threads":
			m.Threads = n
		}
	}
	return m, nil
}

// PIDsMatching lists the processes whose command line contains any of subs:
// a control plane's etcd and kube-apiserver, which envtest does not expose.
func PIDsMatching(subs ...string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		for _, s := range subs {
			if s != "" && strings.Contains(string(cmdline), s) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// CPUOf is the CPU time the processes have used; those gone count nothing.
func CPUOf(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		if d, err := ProcCPU(pid); err == nil {
			sum += d
		}
	}
	return sum
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat;
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// ProcCPU is the CPU time (user + system) pid has used, from /proc/<pid>/stat.
func ProcCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return ParseStatCPU(string(data))
}

// ParseStatCPU takes utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line; the command name in parentheses may hold spaces.
func ParseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, errors.New("short /proc stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}
