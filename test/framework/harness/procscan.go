package harness

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
)

// ProcessesMentioning lists the pids of the processes (other than this
// one) whose command line contains s: the way to find what a tool left
// running under a directory of its own (its data, certificate or socket
// paths are in its arguments) when the tool did not start it itself.
func ProcessesMentioning(s string) []int {
	self := os.Getpid()
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids
}
