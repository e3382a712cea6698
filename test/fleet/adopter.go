package fleet

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// stopGrace is how long an adopter the harness stops may take to exit on
// SIGTERM before it is killed (and that counted as a failure).
const stopGrace = 15 * time.Second

// detected selects the guard's detection line: whichever detector saw the
// change first logs it with detectedBy ("FeatureGate changed; requesting
// shutdown", or the feature-set variant that holds the exit).
var detected = harness.HasKey("detectedBy")

// lapsed selects the guard's line when its proof of freshness lapses.
var lapsed = harness.Message("FeatureGate not proven current within the freshness bound")

// Exit is one process's end.
type Exit struct {
	Process *harness.Process
	At      time.Time
	Code    int
	// ByHarness: the harness stopped it (a stop or a move to another
	// version), so it is no restart the FeatureGate caused.
	ByHarness bool
}

// Restart reports whether the exit is one the guard asked for: exit 0 on
// its own.
func (e Exit) Restart() bool { return !e.ByHarness && e.Code == 0 }

// Adopter runs one adopter under a kubelet-like loop: a process that exits
// is started again at once, with the adopter's current version.
type Adopter struct {
	Spec Spec
	// argv is the command line of a process running version, answering
	// /readyz on addrs[0]; addrs has one more loopback address per port.
	argv  func(version string, addrs []string) []string
	ports int
	bin   string
	// host is the adopter's own loopback address: its ports are fixed on
	// it, so no other process's ephemeral port can take one between two
	// starts (a port drawn free and released is up for grabs again among
	// sixty processes' client connections).
	host string
	// libraryGo is set for library-go's FeatureGateAccess: it logs no
	// detection line, and exits at once.
	libraryGo bool

	mu          sync.Mutex
	version     string
	proc        *harness.Process
	starts      []*harness.Process
	exits       []Exit
	failures    []string
	lastEvent   time.Time
	harnessStop bool
	nextVersion string
	stopping    bool
	done        chan struct{}
}

func newAdopter(spec Spec, bin string, argv func(version string, addrs []string) []string) *Adopter {
	return &Adopter{Spec: spec, bin: bin, argv: argv, version: spec.Version, host: nextHost()}
}

// hosts counts the loopback addresses handed out; every address of
// 127.0.0.0/8 reaches the loopback interface on Linux.
var hosts atomic.Uint32

// nextHost is a loopback address no other adopter of this process uses,
// from 127.1.0.1 on (127.0.0.1 stays the harness's and the control
// plane's).
func nextHost() string {
	n := hosts.Add(1)
	return fmt.Sprintf("127.1.%d.%d", n/250, n%250+1)
}

// basePort is the first of an adopter's fixed ports on its host, below
// Linux's ephemeral range (32768 on), so no client connection takes it.
const basePort = 18080

// Run starts the loop; Stop ends it.
func (a *Adopter) Run() {
	a.mu.Lock()
	a.stopping, a.done = false, make(chan struct{})
	done := a.done
	a.mu.Unlock()
	go func() {
		defer close(done)
		a.loop()
	}()
}

func (a *Adopter) loop() {
	for {
		a.mu.Lock()
		version := a.version
		a.mu.Unlock()
		p, err := a.start(version)
		a.mu.Lock()
		if err != nil {
			a.failures = append(a.failures, err.Error())
			a.mu.Unlock()
			return // a start that fails fails the run; nothing to retry
		}
		a.proc, a.starts, a.lastEvent = p, append(a.starts, p), time.Now()
		stopping := a.stopping
		a.mu.Unlock()
		if stopping {
			p.Stop(stopGrace)
		}
		<-p.Done()
		a.mu.Lock()
		e := Exit{Process: p, At: p.ExitedAt(), Code: p.ExitCode(), ByHarness: a.harnessStop || a.stopping}
		a.exits, a.lastEvent = append(a.exits, e), e.At
		if e.Code != 0 {
			a.failures = append(a.failures, fmt.Sprintf("%s (pid %d) exited with code %d (%v); its last lines:\n%s", a.Spec.Name, p.Pid(), e.Code, p.Err(), lastLines(p, 8)))
		}
		if a.stopping {
			a.mu.Unlock()
			return
		}
		if a.nextVersion != "" {
			a.version, a.nextVersion = a.nextVersion, ""
		}
		a.harnessStop = false
		a.mu.Unlock()
	}
}

func (a *Adopter) start(version string) (*harness.Process, error) {
	addrs := make([]string, 1+a.ports)
	for i := range addrs {
		addrs[i] = net.JoinHostPort(a.host, strconv.Itoa(basePort+i))
	}
	return harness.Start(harness.Options{Name: a.Spec.Name, Path: a.bin, Probe: addrs[0], Args: a.argv(version, addrs)})
}

// lastLines is the last n lines of p's output, for an error.
func lastLines(p *harness.Process, n int) string {
	lines := p.Log.Lines()
	lines = lines[max(0, len(lines)-n):]
	return strings.Join(raw(lines), "\n")
}

// Stop stops the process (not counted as a restart) and the loop, and
// returns once both have ended.
func (a *Adopter) Stop() {
	a.mu.Lock()
	a.stopping = true
	p, done := a.proc, a.done
	a.mu.Unlock()
	if p != nil {
		p.Stop(stopGrace)
	}
	if done != nil {
		<-done
	}
}

// Move restarts the adopter with another release version, as a rollout
// does: the harness's restart, not the guard's.
func (a *Adopter) Move(version string) {
	a.mu.Lock()
	a.harnessStop, a.nextVersion = true, version
	p := a.proc
	a.mu.Unlock()
	p.Stop(stopGrace)
}

// Version is the version the current (or next) process runs.
func (a *Adopter) Version() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.nextVersion != "" {
		return a.nextVersion
	}
	return a.version
}

// Current is the latest process.
func (a *Adopter) Current() *harness.Process {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.proc
}

// DecideURL is the /decide of the adopter's process, whichever runs: its
// ports are fixed on its host. Empty for an adopter that serves none.
func (a *Adopter) DecideURL() string {
	if a.ports < 1 || a.libraryGo {
		return ""
	}
	return "http://" + net.JoinHostPort(a.host, strconv.Itoa(basePort+1)) + "/decide"
}

// Ready reports whether the latest process runs and answers /readyz 200.
func (a *Adopter) Ready() bool {
	p := a.Current()
	return p != nil && !p.Exited() && p.Ready()
}

// Starts is the number of processes started so far.
func (a *Adopter) Starts() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.starts)
}

// Processes are the processes started so far, oldest first.
func (a *Adopter) Processes() []*harness.Process {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]*harness.Process(nil), a.starts...)
}

// Exits are the exits so far, oldest first.
func (a *Adopter) Exits() []Exit {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Exit(nil), a.exits...)
}

// Restarts counts the restarts the guard asked for so far.
func (a *Adopter) Restarts() int {
	n := 0
	for _, e := range a.Exits() {
		if e.Restart() {
			n++
		}
	}
	return n
}

// LastEvent is the time of the latest start or exit.
func (a *Adopter) LastEvent() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lastEvent
}

// Failures lists non-zero exits and failed starts.
func (a *Adopter) Failures() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.failures...)
}
