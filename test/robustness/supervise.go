package robustness

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// leaseName is the operator's default leader election Lease.
const leaseName = "featuregate-operator.featuregate-operator.io"

// supervised is one container as a kubelet runs it: restarted whenever it
// exits, after a backoff that doubles from 250 ms up to 2 s and resets
// after 20 s of running (the kubelet's starts at 10 s and caps at 5 min;
// shorter here so that a campaign sees many lives).
type supervised struct {
	c      *campaign
	name   string
	args   []string
	bin    string
	probe  string
	decide string

	mu       sync.Mutex
	p        *harness.Process
	ready    bool
	killed   bool
	stopping bool
	done     chan struct{}
}

func (c *campaign) startProcesses() {
	consumer := &supervised{c: c, name: "consumer", bin: c.cfg.Consumer, probe: freeAddr(), decide: freeAddr()}
	consumer.args = []string{"--kubeconfig=" + c.kube, "--health-probe-bind-address=" + consumer.probe, "--decide-bind-address=" + consumer.decide,
		"--release-version=" + version, "--gate=" + gate, "--namespace=" + namespace, "--zap-time-encoding=rfc3339nano"}
	all := []*supervised{consumer}
	for i := range 2 {
		op := &supervised{c: c, name: fmt.Sprintf("operator-%d", i), bin: c.cfg.Manager, probe: freeAddr()}
		op.args = []string{"--kubeconfig=" + c.kube, "--health-probe-bind-address=" + op.probe, "--metrics-bind-address=0", "--zap-time-encoding=rfc3339nano",
			"--release-version=" + version, "--manifests-dir=" + filepath.Join(c.cfg.Dir, "payload"), "--resync-period=1s",
			"--leader-elect", "--leader-election-namespace=" + namespace,
			// Short: a new replica waits out a lease it finds held (killed
			// or stolen) for the lease duration from when it saw it.
			"--leader-elect-lease-duration=6s", "--leader-elect-renew-deadline=4s", "--leader-elect-retry-period=1s"}
		all = append(all, op)
	}
	c.mu.Lock()
	for _, s := range all {
		s.done = make(chan struct{})
		c.procs[s.name] = s
	}
	c.mu.Unlock()
	for _, s := range all {
		go s.run()
	}
}

// freeAddr is an address for a supervised process: it binds it again at
// every restart (harness.RebindPort).
func freeAddr() string {
	port, err := harness.RebindPort()
	if err != nil {
		panic(err) // the loopback has no free port: nothing can run
	}
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// run starts the process again each time it exits, until stop.
func (s *supervised) run() {
	defer close(s.done)
	backoff := 250 * time.Millisecond
	for life := 0; ; life++ {
		opts := harness.Options{Name: fmt.Sprintf("%s#%d", s.name, life), Path: s.bin, Args: s.args, Probe: s.probe,
			LogFile: filepath.Join(s.c.cfg.Dir, fmt.Sprintf("%s-%02d.log", s.name, life))}
		p, err := harness.Start(opts)
		if err != nil {
			s.c.cfg.Logf("process not started, its supervisor gives up: name=%s err=%v", s.name, err)
			return
		}
		p.Log.OnLine(func(l harness.Line) {
			switch {
			case strings.Contains(l.Raw, `"msg":"Startup snapshot taken"`):
				s.c.rec.Record(Event{Kind: KindSnapshot, Proc: s.name, T: l.At(), Value: l.Get("featureSet")})
			case strings.Contains(l.Raw, `"msg":"FeatureGate not read; no feature set assumed, retrying"`):
				s.c.rec.Record(Event{Kind: KindUnread, Proc: s.name, T: l.At()})
			case strings.Contains(l.Raw, `"msg":"FeatureGate changed; requesting shutdown"`):
				s.c.rec.Record(Event{Kind: KindStopping, Proc: s.name, T: l.At()})
			case strings.Contains(l.Raw, `"msg":"Successfully acquired lease"`):
				s.c.rec.Record(Event{Kind: KindLeading, Proc: s.name, T: l.At()})
				s.c.mu.Lock()
				s.c.leader = s.name
				s.c.mu.Unlock()
			}
		})
		s.mu.Lock()
		s.p, s.killed, s.ready = p, false, false
		stopping := s.stopping
		s.mu.Unlock()
		s.c.rec.Record(Event{Kind: KindStart, Proc: s.name, T: p.Started()})
		if stopping {
			p.Stop(10 * time.Second)
		}
		exited, _ := p.Wait(context.Background())
		code := p.ExitCode()
		s.mu.Lock()
		killed, stopping := s.killed, s.stopping
		s.ready = false
		s.mu.Unlock()
		s.c.rec.Record(Event{Kind: KindExit, Proc: s.name, T: exited, Code: &code, Killed: killed})
		if stopping {
			return
		}
		if exited.Sub(p.Started()) > 20*time.Second {
			backoff = 250 * time.Millisecond
		}
		time.Sleep(backoff) //nolint:forbidigo // the kubelet's restart backoff
		backoff = min(2*backoff, 2*time.Second)
	}
}

// pid is the current life's process, or 0 when none runs.
func (s *supervised) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.p == nil || s.p.Exited() {
		return 0
	}
	return s.p.Pid()
}

// kill SIGKILLs the current life; the supervisor restarts it.
func (s *supervised) kill() {
	s.mu.Lock()
	p := s.p
	s.killed = true
	s.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// stop ends the process for good, gracefully.
func (s *supervised) stop() {
	s.mu.Lock()
	s.stopping = true
	p := s.p
	s.mu.Unlock()
	if p != nil {
		p.Stop(10 * time.Second)
	}
	<-s.done
}

// pollReady records a change of readiness.
func (s *supervised) pollReady(rec *Recorder) {
	s.mu.Lock()
	p, was := s.p, s.ready
	s.mu.Unlock()
	if p == nil || p.Exited() {
		return
	}
	now := p.Ready()
	if now == was || p.Exited() {
		return
	}
	s.mu.Lock()
	if s.p == p {
		s.ready = now
	}
	s.mu.Unlock()
	rec.Record(Event{Kind: KindReady, Proc: s.name, Ready: &now})
}
