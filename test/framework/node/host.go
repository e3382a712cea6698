package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// What the node's components change on the host outside its directory,
// besides processes, mounts, interfaces and iptables rules: kernel settings
// (the kubelet sets kernel.panic and vm.overcommit_memory, the bridge plugin
// turns on forwarding) and directories they create when missing.
var (
	watchedSysctls = []string{
		"net.ipv4.ip_forward",
		"net.ipv6.conf.all.forwarding",
		"net.ipv4.conf.all.route_localnet",
		"net.bridge.bridge-nf-call-iptables",
		"net.bridge.bridge-nf-call-ip6tables",
		"vm.overcommit_memory",
		"vm.panic_on_oom",
		"kernel.panic",
		"kernel.panic_on_oops",
		"kernel.keys.root_maxkeys",
		"kernel.keys.root_maxbytes",
	}
	watchedPaths = []string{
		"/var/lib/cni",
		"/var/log/pods",
		"/var/log/containers",
		"/var/lib/kubelet",
		"/var/lib/containerd",
		"/run/containerd",
		"/run/netns",
		"/etc/cni",
		"/opt/cni",
		"/etc/kubernetes",
		"/usr/libexec/kubernetes",
	}
	// Each cgroup v1 hierarchy (and the unified one) gets this directory
	// from the kubelet (cgroupsPerQOS) for the pods' cgroups.
	podsCgroup = "kubepods"
	cgroupRoot = "/sys/fs/cgroup"
)

// hostState is what the node may change on the host, captured before it
// starts, so that teardown can put it back and the leftover check can tell
// what was not.
type hostState struct {
	mounts   []string
	links    []string
	iptables map[string]string // "iptables", "ip6tables": normalized save output
	sysctls  map[string]string
	paths    map[string]bool
	cgroups  []string
}

func captureHost() (*hostState, error) {
	h := &hostState{iptables: map[string]string{}, sysctls: map[string]string{}, paths: map[string]bool{}}
	var err error
	if h.mounts, err = mountPoints(); err != nil {
		return nil, err
	}
	if h.links, err = linkNames(); err != nil {
		return nil, err
	}
	for _, tool := range []string{"iptables", "ip6tables"} {
		if h.iptables[tool], err = iptablesSave(tool); err != nil {
			return nil, err
		}
	}
	for _, k := range watchedSysctls {
		h.sysctls[k] = readSysctl(k)
	}
	for _, p := range watchedPaths {
		_, err := os.Lstat(p)
		h.paths[p] = err == nil
	}
	h.cgroups = podCgroups()
	return h, nil
}

// mountPoints lists the mount points of /proc/self/mountinfo, in order.
func mountPoints() ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 {
			out = append(out, unescapeMount(f[4]))
		}
	}
	return out, nil
}

func unescapeMount(s string) string {
	return regexp.MustCompile(`\\[0-7]{3}`).ReplaceAllStringFunc(s, func(o string) string {
		n, _ := strconv.ParseUint(o[1:], 8, 8)
		return string(rune(n))
	})
}

// linkNames lists the network interfaces.
func linkNames() ([]string, error) {
	entries, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out, nil
}

func linkExists(name string) bool {
	_, err := os.Lstat(filepath.Join("/sys/class/net", name))
	return err == nil
}

var counters = regexp.MustCompile(`\[\d+:\d+\]`)

// iptablesSave is `tool-save` without comments and counters, and without
// the tables that hold nothing but empty built-in chains accepting
// everything (what restoring a table that was not there leaves).
func iptablesSave(tool string) (string, error) {
	out, err := exec.Command(tool + "-save").Output()
	if err != nil {
		return "", fmt.Errorf("%s-save: %w", tool, err)
	}
	var b strings.Builder
	for _, table := range splitTables(string(out)) {
		if !emptyTable(table) {
			b.WriteString(strings.Join(table, "\n") + "\n")
		}
	}
	return b.String(), nil
}

// splitTables splits iptables-save output into tables, each from its
// "*name" line to its COMMIT, counters zeroed and comments dropped.
func splitTables(save string) [][]string {
	var tables [][]string
	for _, line := range strings.Split(save, "\n") {
		line = counters.ReplaceAllString(strings.TrimSpace(line), "[0:0]")
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			tables = append(tables, []string{line})
		case len(tables) > 0:
			tables[len(tables)-1] = append(tables[len(tables)-1], line)
		}
	}
	return tables
}

func emptyTable(table []string) bool {
	for _, line := range table[1:] {
		if line == "COMMIT" {
			continue
		}
		f := strings.Fields(line)
		builtin := len(f) == 3 && slices.Contains([]string{":INPUT", ":OUTPUT", ":FORWARD", ":PREROUTING", ":POSTROUTING"}, f[0])
		if !builtin || f[1] != "ACCEPT" {
			return false
		}
	}
	return true
}

// restoreIPTables puts every table that differs from before back as it was:
// iptables-restore replaces each table it is given, chains and rules; a
// table that was not there is given empty.
func restoreIPTables(tool, before string) error {
	now, err := exec.Command(tool + "-save").Output()
	if err != nil {
		return fmt.Errorf("%s-save: %w", tool, err)
	}
	old := map[string][]string{}
	for _, t := range splitTables(before) {
		old[t[0]] = t
	}
	var input strings.Builder
	for _, t := range splitTables(string(now)) {
		if want, ok := old[t[0]]; ok {
			if !slices.Equal(want, t) {
				input.WriteString(strings.Join(want, "\n") + "\n")
			}
		} else if !emptyTable(t) {
			input.WriteString(t[0] + "\nCOMMIT\n")
		}
	}
	if input.Len() == 0 {
		return nil
	}
	cmd := exec.Command(tool + "-restore")
	cmd.Stdin = strings.NewReader(input.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s-restore: %w: %s", tool, err, out)
	}
	return nil
}

func sysctlPath(key string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
}

// readSysctl is a kernel setting's value, "" when the kernel has none.
func readSysctl(key string) string {
	data, err := os.ReadFile(sysctlPath(key))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// podCgroups lists the kubelet's pod cgroup directories, one per hierarchy.
func podCgroups() []string {
	matches, _ := filepath.Glob(filepath.Join(cgroupRoot, "*", podsCgroup))
	return matches
}

// nodeProcesses are the pids of the processes the node started, wherever
// they ended up: those whose command line names its directory (the
// components, containerd's shims), those running a binary of its assets,
// and those in the pods' cgroups (the containers).
func nodeProcesses(dir, assets string) []int {
	self := os.Getpid()
	pids := map[int]bool{}
	for _, pid := range harness.ProcessesMentioning(dir) {
		pids[pid] = true
	}
	if assets != "" {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			exe, _ := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
			if pid, err := strconv.Atoi(e.Name()); err == nil && pid != self && strings.HasPrefix(exe, assets+"/") {
				pids[pid] = true
			}
		}
	}
	for _, cg := range podCgroups() {
		_ = filepath.WalkDir(cg, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && pid != self {
					pids[pid] = true
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(pids))
	for pid := range pids {
		out = append(out, pid)
	}
	sort.Ints(out)
	return out
}

func describeProcess(pid int) string {
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	s := strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return fmt.Sprintf("pid %d: %s", pid, s)
}

// sweep removes whatever the node left on the host, whether its components
// stopped cleanly or not: processes, mounts, interfaces, iptables rules,
// kernel settings, cgroups and the directories they created, then dir.
func (h *hostState) sweep(dir, assets string) error {
	var errs []error
	// Kill until none is left: a shim may start a process as it dies.
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		pids := nodeProcesses(dir, assets)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return len(pids) == 0, nil
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("processes still there after SIGKILL: %v", describeAll(nodeProcesses(dir, assets))))
	}
	errs = append(errs, h.unmount(dir)...)
	if links, err := linkNames(); err == nil {
		for _, l := range links {
			if !slices.Contains(h.links, l) {
				// A veth goes with its peer: deleting one end, or the
				// pod's network namespace going, removes the other
				// between our listing and our delete. Gone is what we
				// want; only one still there is an error.
				if out, err := exec.Command("ip", "link", "delete", l).CombinedOutput(); err != nil && linkExists(l) {
					errs = append(errs, fmt.Errorf("delete interface %s: %w: %s", l, err, out))
				}
			}
		}
	}
	for tool, before := range h.iptables {
		errs = append(errs, restoreIPTables(tool, before))
	}
	for k, v := range h.sysctls {
		if v != "" && readSysctl(k) != v {
			if err := os.WriteFile(sysctlPath(k), []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restore %s=%s: %w", k, v, err))
			}
		}
	}
	for _, cg := range podCgroups() {
		if !slices.Contains(h.cgroups, cg) {
			errs = append(errs, removeCgroup(cg))
		}
	}
	for p, existed := range h.paths {
		if !existed {
			errs = append(errs, os.RemoveAll(p))
		}
	}
	errs = append(errs, os.RemoveAll(dir))
	return errors.Join(errs...)
}

func describeAll(pids []int) []string {
	out := make([]string, 0, len(pids))
	for _, pid := range pids {
		out = append(out, describeProcess(pid))
	}
	return out
}

// unmount unmounts every mount that was not there before and lies under
// dir or a watched path, deepest first; a busy one is detached.
func (h *hostState) unmount(dir string) []error {
	now, err := mountPoints()
	if err != nil {
		return []error{err}
	}
	var todo []string
	for _, mp := range now {
		if !slices.Contains(h.mounts, mp) && h.ours(mp, dir) {
			todo = append(todo, mp)
		}
	}
	// Deepest first; a path mounted twice is unmounted twice.
	sort.SliceStable(todo, func(i, j int) bool { return len(todo[i]) > len(todo[j]) })
	var errs []error
	for _, mp := range todo {
		if err := syscall.Unmount(mp, 0); err != nil && !errors.Is(err, syscall.EINVAL) {
			if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
			}
		}
	}
	return errs
}

func (h *hostState) ours(mp, dir string) bool {
	if under(mp, dir) {
		return true
	}
	for _, p := range watchedPaths {
		if under(mp, p) {
			return true
		}
	}
	return false
}

func under(path, dir string) bool { return path == dir || strings.HasPrefix(path, dir+"/") }

// removeCgroup removes a cgroup directory tree, deepest first (a cgroup
// directory is removed with rmdir, and only once it has no children).
func removeCgroup(root string) error {
	var dirs []string
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	var errs []error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := syscall.Rmdir(dirs[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", dirs[i], err))
		}
	}
	return errors.Join(errs...)
}

// leftovers lists what differs from h on the host and is the node's doing:
// processes, mounts, interfaces, iptables rules, kernel settings, cgroups,
// directories; empty when the host is as it was.
func (h *hostState) leftovers(dir, assets string) []string {
	var out []string
	for _, d := range describeAll(nodeProcesses(dir, assets)) {
		out = append(out, "process "+d)
	}
	if now, err := mountPoints(); err != nil {
		out = append(out, "mounts: "+err.Error())
	} else {
		for _, mp := range now {
			if !slices.Contains(h.mounts, mp) {
				out = append(out, "mount "+mp)
			}
		}
	}
	if now, err := linkNames(); err != nil {
		out = append(out, "interfaces: "+err.Error())
	} else {
		for _, l := range now {
			if !slices.Contains(h.links, l) {
				out = append(out, "network interface "+l)
			}
		}
	}
	for tool, before := range h.iptables {
		now, err := iptablesSave(tool)
		switch {
		case err != nil:
			out = append(out, err.Error())
		case now != before:
			out = append(out, fmt.Sprintf("%s rules differ from before the node:\n%s", tool, lineDiff(before, now)))
		}
	}
	for _, k := range watchedSysctls {
		if now := readSysctl(k); now != h.sysctls[k] {
			out = append(out, fmt.Sprintf("sysctl %s = %s, was %s", k, now, h.sysctls[k]))
		}
	}
	for _, cg := range podCgroups() {
		if !slices.Contains(h.cgroups, cg) {
			out = append(out, "cgroup "+cg)
		}
	}
	for _, p := range watchedPaths {
		if _, err := os.Lstat(p); err == nil && !h.paths[p] {
			out = append(out, "path "+p)
		}
	}
	if _, err := os.Lstat(dir); err == nil {
		out = append(out, "node directory "+dir)
	}
	return out
}

// lineDiff lists the lines only in a ("-") and only in b ("+").
func lineDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	var out []string
	for _, l := range al {
		if !slices.Contains(bl, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range bl {
		if !slices.Contains(al, l) {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
