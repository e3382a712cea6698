// Package harness runs the operator binary as a real process for the
// end-to-end tests, the deploy tests and the bench, and holds what they share
// around it: the build, readiness probes, free ports, kubeconfigs, clients
// and FeatureGate set-up. Helpers taking a TB fail the test; the others
// return errors, for the bench, which is not a test.
package harness

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// TB is the part of testing.TB the harness uses; *testing.T is one.
type TB interface {
	Helper()
	Cleanup(func())
	Context() context.Context
	TempDir() string
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Failed() bool
}

// Options says what to start.
type Options struct {
	// Name is how messages call the process.
	Name string
	Path string
	Args []string
	// Dir is the working directory; the caller's when empty.
	Dir string
	// Env is added to the caller's environment, from which KUBECONFIG is
	// always dropped: every caller says which API server it means.
	Env []string
	// Probe is the health probe address (host:port) the process serves,
	// for Readyz.
	Probe string
	// LogFile, when set, receives a copy of the output, to look into a run
	// afterwards; errors name it.
	LogFile string
	// Echo, when set, receives a copy of the output as it arrives (a
	// terminal, for run-local); its write errors are ignored, so that a
	// reader that went away does not stop the process.
	Echo io.Writer
}

// Process is a started process. Its stdout and stderr go, in the order
// written, to Log.
type Process struct {
	Name  string
	Probe string
	Log   *Log

	cmd     *exec.Cmd
	output  *os.File // the read end of the output pipe
	echo    io.Writer
	started time.Time
	logFile string
	done    chan struct{}

	mu       sync.Mutex
	exitedAt time.Time
	err      error
	code     int
}

// running tracks the processes Start started that have not exited, for
// StopAll.
var running struct {
	sync.Mutex
	m map[*Process]struct{}
}

// Start starts a process in its own process group (a Ctrl-C on the terminal
// reaches only the harness, which stops its processes itself), killed should
// the harness die first.
func Start(opts Options) (*Process, error) {
	p := &Process{Name: opts.Name, Probe: opts.Probe, Log: &Log{}, logFile: opts.LogFile, echo: opts.Echo, done: make(chan struct{})}
	if p.Name == "" {
		p.Name = opts.Path
	}
	p.cmd = exec.Command(opts.Path, opts.Args...)
	p.cmd.Dir = opts.Dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") {
			p.cmd.Env = append(p.cmd.Env, kv)
		}
	}
	p.cmd.Env = append(p.cmd.Env, opts.Env...)
	p.cmd.SysProcAttr = sysProcAttr()
	// A pipe of our own rather than exec's copying goroutine: Wait then
	// returns when the process exits, and the exit time is exact.
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p.cmd.Stdout, p.cmd.Stderr = w, w
	var file *os.File
	if opts.LogFile != "" {
		if file, err = os.Create(opts.LogFile); err != nil {
			r.Close()
			w.Close()
			return nil, err
		}
	}
	running.Lock()
	defer running.Unlock()
	p.started = time.Now()
	err = p.cmd.Start()
	w.Close()
	if err != nil {
		r.Close()
		if file != nil {
			file.Close()
		}
		return nil, fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.output = r
	if running.m == nil {
		running.m = map[*Process]struct{}{}
	}
	running.m[p] = struct{}{}
	read := make(chan struct{})
	go func() {
		defer close(read)
		p.copyOutput(r, file)
	}()
	go func() {
		err := p.cmd.Wait()
		at := time.Now()
		<-read
		p.mu.Lock()
		p.exitedAt, p.err, p.code = at, err, p.cmd.ProcessState.ExitCode()
		p.mu.Unlock()
		// The output is complete before anyone learns of the exit.
		p.Log.Close()
		if file != nil {
			file.Close()
		}
		running.Lock()
		delete(running.m, p)
		running.Unlock()
		close(p.done)
	}()
	return p, nil
}

func (p *Process) copyOutput(r io.ReadCloser, file io.Writer) {
	defer r.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if file != nil {
				_, _ = file.Write(buf[:n])
			}
			if p.echo != nil {
				_, _ = p.echo.Write(buf[:n])
			}
			_, _ = p.Log.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// StartT starts a process for a test: it fails the test if it cannot, kills
// the process when the test ends, and then, if the test failed, logs the
// process's output.
func StartT(tb TB, opts Options) *Process {
	tb.Helper()
	p, err := Start(opts)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() {
		if !p.Exited() {
			p.Kill()
			select {
			case <-p.done:
			case <-time.After(10 * time.Second):
				tb.Errorf("%s: still running 10s after SIGKILL", p.Name)
			}
		}
		if tb.Failed() {
			p.logOutput(tb)
		}
	})
	return p
}

func (p *Process) logOutput(tb TB) {
	lines := p.Log.Lines()
	raw := make([]string, len(lines))
	for i, l := range lines {
		raw[i] = l.Raw
	}
	if len(raw) > 130 {
		tb.Logf("%s: first 30 of %d log lines:\n%s", p.Name, len(raw), strings.Join(raw[:30], "\n"))
		raw = raw[len(raw)-100:]
	}
	tb.Logf("%s: last %d log lines (exited: %v, code %d):\n%s", p.Name, len(raw), p.Exited(), p.ExitCode(), strings.Join(raw, "\n"))
}

// Pid is the process's id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Started is when the process was started.
func (p *Process) Started() time.Time { return p.started }

// LogPath is Options.LogFile.
func (p *Process) LogPath() string { return p.logFile }

// Done is closed once the process has exited and its output is read.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Running is !Exited, for Consistently.
func (p *Process) Running() bool { return !p.Exited() }

// ExitCode is the exit code; -1 while running or after a fatal signal.
func (p *Process) ExitCode() int {
	if !p.Exited() {
		return -1
	}
	return p.code
}

// ExitedAt is when the process exited; zero while it runs.
func (p *Process) ExitedAt() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exitedAt
}

// Err is what waiting for the process returned: nil while it runs and
// after exit code 0.
func (p *Process) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// Wait waits for the exit and returns its time; the error is only ever
// ctx's (Err is the process's own).
func (p *Process) Wait(ctx context.Context) (time.Time, error) {
	select {
	case <-p.done:
		return p.ExitedAt(), nil
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("%s: waiting for exit: %w", p.Name, ctx.Err())
	}
}

// WaitExit waits up to timeout for the exit and returns the exit code.
func (p *Process) WaitExit(timeout time.Duration) (int, error) {
	select {
	case <-p.done:
		return p.code, nil
	case <-time.After(timeout):
		return -1, fmt.Errorf("%s: still running after %s", p.Name, timeout)
	}
}

// Signal sends sig to the process (not its group); os.ErrProcessDone once
// it is gone.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// SignalGroup sends sig to the process group, as a terminal's Ctrl-C
// (SIGINT) reaches a foreground job: the process and every child that did
// not move to a group of its own.
func (p *Process) SignalGroup(sig syscall.Signal) error { return syscall.Kill(-p.cmd.Process.Pid, sig) }

// CloseOutput closes the harness's end of the output pipe, as when the
// reader of a `cmd | tee log` pipeline dies: the process's next write to
// stdout or stderr fails (EPIPE, or SIGPIPE when unhandled). Nothing more
// reaches Log.
func (p *Process) CloseOutput() error { return p.output.Close() }

// Kill sends SIGKILL to the process group, without waiting.
func (p *Process) Kill() { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }

// Stop sends SIGTERM, and SIGKILL when the process is still there after
// grace. It returns once the process is gone.
func (p *Process) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.Kill()
		<-p.done
	}
}

// StopAll stops, in parallel, every process Start started that is still
// running: the bench's cleanup.
func StopAll(grace time.Duration) {
	running.Lock()
	all := make([]*Process, 0, len(running.m))
	for p := range running.m {
		all = append(all, p)
	}
	running.Unlock()
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Go(func() { p.Stop(grace) })
	}
	wg.Wait()
}

// WaitLine waits for the first line at index from or later that m selects,
// and returns it with its index. It fails when the process exits first or
// ctx ends.
func (p *Process) WaitLine(ctx context.Context, from int, m Match) (Line, int, error) {
	l, i, err := p.Log.Wait(ctx, from, m)
	switch {
	case errors.Is(err, ErrLogClosed):
		return l, i, fmt.Errorf("%s exited (%v) without logging a line %s%s", p.Name, p.exitStatus(), m, p.seeLog())
	case err != nil:
		return l, i, fmt.Errorf("%s: no log line %s: %w%s", p.Name, m, err, p.seeLog())
	}
	return l, i, nil
}

// logLag bounds how long a line the process has already written can take
// to pass through the pipe and the reader into Log.
const logLag = 10 * time.Second

// Logged checks that the process logged a line m selects. A line written
// just before an observable effect (readiness, an object written) can still
// be in the pipe when the test sees the effect, so Logged waits up to
// logLag for it rather than reading Log once.
func (p *Process) Logged(m Match) error { return p.loggedWithin(m, logLag) }

// WaitForLog waits up to timeout for a line containing substr.
func (p *Process) WaitForLog(substr string, timeout time.Duration) error {
	return p.loggedWithin(Contains(substr), timeout)
}

// loggedWithin waits up to timeout for a line m selects.
func (p *Process) loggedWithin(m Match, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_, _, err := p.WaitLine(ctx, 0, m)
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: no log line %s after %s%s", p.Name, m, timeout, p.seeLog())
	}
	return err
}

// exitStatus says how the process ended: "exit status 2", "signal: killed".
func (p *Process) exitStatus() string {
	if err := p.Err(); err != nil {
		return err.Error()
	}
	return "exit status 0"
}

func (p *Process) seeLog() string {
	if p.logFile == "" {
		return ""
	}
	return "; output in " + p.logFile
}
