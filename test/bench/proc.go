package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// logLine is one stderr line of an operator process. JSON lines (zap) carry
// their own timestamp, which is taken on the same machine clock as the
// harness's; other lines (klog) only have the time the harness read them.
type logLine struct {
	Recv time.Time
	TS   time.Time
	Msg  string
	Raw  string
}

// At is the best-known time of the line: its own timestamp when it has one.
func (l logLine) At() time.Time {
	if !l.TS.IsZero() {
		return l.TS
	}
	return l.Recv
}

// parseLogLine reads the msg and ts fields of a zap JSON line; ts must be
// RFC 3339 (the operator runs with --zap-time-encoding=rfc3339nano, as
// the default RFC 3339 encoding has only whole seconds).
func parseLogLine(raw string, recv time.Time) logLine {
	l := logLine{Recv: recv, Raw: raw, Msg: raw}
	var fields struct {
		TS  any    `json:"ts"`
		Msg string `json:"msg"`
	}
	if !strings.HasPrefix(raw, "{") || json.Unmarshal([]byte(raw), &fields) != nil {
		return l
	}
	l.Msg = fields.Msg
	switch ts := fields.TS.(type) {
	case string:
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			l.TS = t
		}
	case float64:
		sec := int64(ts)
		l.TS = time.Unix(sec, int64((ts-float64(sec))*1e9))
	}
	return l
}

// proc is an operator process started by the harness, the way a kubelet
// would start a container: its stderr is read line by line, its exit time
// is recorded the moment wait returns.
type proc struct {
	name       string
	cmd        *exec.Cmd
	healthPort int
	started    time.Time

	mu      sync.Mutex
	lines   []logLine
	changed chan struct{} // closed and replaced on every new line and on exit
	onLine  func(logLine)
	exited  time.Time
	exitErr error
	done    chan struct{}
	logFile *os.File
}

// procs tracks every process started, so that cleanup stops them all.
var procs struct {
	sync.Mutex
	all []*proc
}

// startProc starts the manager binary with args and the kubeconfig. logPath
// receives a copy of the output, for looking into a run afterwards.
func startProc(name, manager, kubeconfig, logPath string, healthPort int, args ...string) (*proc, error) {
	p := &proc{name: name, healthPort: healthPort, changed: make(chan struct{}), done: make(chan struct{})}
	args = append([]string{
		"--kubeconfig=" + kubeconfig,
		"--zap-time-encoding=rfc3339nano",
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", healthPort),
	}, args...)
	if !hasFlag(args, "--metrics-bind-address") {
		args = append(args, "--metrics-bind-address=0")
	}
	p.cmd = exec.Command(manager, args...)
	p.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	// Its own process group: a Ctrl-C on the terminal reaches only the
	// harness, which then stops the operators itself.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stderr = w
	if p.logFile, err = os.Create(logPath); err != nil {
		r.Close()
		w.Close()
		return nil, err
	}
	p.cmd.Stdout = p.logFile
	procs.Lock()
	defer procs.Unlock()
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		r.Close()
		w.Close()
		p.logFile.Close()
		return nil, err
	}
	w.Close()
	procs.all = append(procs.all, p)
	var reading sync.WaitGroup
	reading.Add(1)
	go func() {
		defer reading.Done()
		p.read(r)
	}()
	go func() {
		err := p.cmd.Wait()
		now := time.Now()
		reading.Wait()
		p.mu.Lock()
		p.exited, p.exitErr = now, err
		p.notifyLocked()
		p.mu.Unlock()
		p.logFile.Close()
		close(p.done)
	}()
	return p, nil
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}

func (p *proc) read(r io.ReadCloser) {
	defer r.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		l := parseLogLine(sc.Text(), time.Now())
		fmt.Fprintln(p.logFile, l.Raw)
		p.mu.Lock()
		p.lines = append(p.lines, l)
		hook := p.onLine
		p.notifyLocked()
		p.mu.Unlock()
		if hook != nil {
			hook(l)
		}
	}
}

func (p *proc) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// OnLine calls f, from the reading goroutine, for every line read from now on.
func (p *proc) OnLine(f func(logLine)) {
	p.mu.Lock()
	p.onLine = f
	p.mu.Unlock()
}

// waitLine waits for the first line (from index from on) containing substr.
// It fails when the process exits first or ctx ends.
func (p *proc) waitLine(ctx context.Context, from int, substr string) (logLine, int, error) {
	for {
		p.mu.Lock()
		for i := from; i < len(p.lines); i++ {
			if strings.Contains(p.lines[i].Raw, substr) {
				l := p.lines[i]
				p.mu.Unlock()
				return l, i, nil
			}
		}
		from = len(p.lines)
		changed, exited := p.changed, !p.exited.IsZero()
		p.mu.Unlock()
		if exited {
			return logLine{}, 0, fmt.Errorf("%s exited (%w) before logging %q; output in %s", p.name, p.exitErr, substr, p.logFile.Name())
		}
		select {
		case <-ctx.Done():
			return logLine{}, 0, fmt.Errorf("%s: waiting for %q: %w; output in %s", p.name, substr, ctx.Err(), p.logFile.Name())
		case <-changed:
		}
	}
}

// findLine is waitLine without waiting.
func (p *proc) findLine(substr string) (logLine, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.lines {
		if strings.Contains(l.Raw, substr) {
			return l, true
		}
	}
	return logLine{}, false
}

// findLineFrom is findLine over the lines from index from on.
func (p *proc) findLineFrom(from int, substr string) (logLine, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := from; i < len(p.lines); i++ {
		if strings.Contains(p.lines[i].Raw, substr) {
			return p.lines[i], true
		}
	}
	return logLine{}, false
}

// waitExit waits for the process to exit and returns when it did; the
// error is only ever ctx's (see exitError for the process's own).
func (p *proc) waitExit(ctx context.Context) (time.Time, error) {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.exited, nil
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("%s: waiting for exit: %w", p.name, ctx.Err())
	}
}

// exitError is what wait returned: nil for exit code 0.
func (p *proc) exitError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitErr
}

// exitedAt is the exit time, zero while running.
func (p *proc) exitedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exited
}

// stop sends SIGTERM, and SIGKILL when the process is still there after
// grace. It returns once the process is gone.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// kill sends SIGKILL at once.
func (p *proc) kill() { _ = p.cmd.Process.Kill() }

// ready reports whether /readyz answers 200.
func (p *proc) ready(c *http.Client) bool {
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", p.healthPort))
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode == http.StatusOK
}

// probeClient polls health endpoints; no keep-alive surprises across
// processes that reuse a port.
var probeClient = &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}

// waitReady polls /readyz every interval and returns the time of the first
// 200.
func (p *proc) waitReady(ctx context.Context, interval time.Duration) (time.Time, error) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if p.ready(probeClient) {
			return time.Now(), nil
		}
		if !p.exitedAt().IsZero() {
			return time.Time{}, fmt.Errorf("%s exited before it was ready; output in %s", p.name, p.logFile.Name())
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("%s: waiting for /readyz: %w; output in %s", p.name, ctx.Err(), p.logFile.Name())
		case <-t.C:
		}
	}
}

// memStatus is the memory part of /proc/<pid>/status, in KiB.
type memStatus struct {
	RSS, HWM, Anon, File, Threads int64
}

// procStatus reads VmRSS, VmHWM, RssAnon, RssFile (KiB) and Threads of pid
// from /proc/<pid>/status.
func procStatus(pid int) (memStatus, error) {
	var m memStatus
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

// pidsMatching lists the processes whose command line contains any of subs:
// a control plane's etcd and kube-apiserver, which envtest does not expose.
func pidsMatching(subs ...string) []int {
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

// cpuOf is the CPU time the processes have used; those gone count nothing.
func cpuOf(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		if d, err := procCPU(pid); err == nil {
			sum += d
		}
	}
	return sum
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat;
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// procCPU is the CPU time (user + system) pid has used, from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(data))
}

// parseStatCPU takes utime and stime (fields 14 and 15) from a
// /proc/<pid>/stat line; the command name in parentheses may hold spaces.
func parseStatCPU(stat string) (time.Duration, error) {
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

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// stopAllProcs stops every process still running; cleanup calls it.
func stopAllProcs() {
	procs.Lock()
	all := procs.all
	procs.Unlock()
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Add(1)
		go func() { defer wg.Done(); p.stop(5 * time.Second) }()
	}
	wg.Wait()
}
