package fleet

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

const (
	// warmup lets the startup burst (lists, informers' first sync) pass
	// before a window starts: the window is the steady state.
	warmup = 10 * time.Second
	// decideInterval is how often the busy variant asks each adopter.
	decideInterval = 100 * time.Millisecond
)

// The cost phases the report compares.
const (
	nameIdleGuard = "guard, idle"
	nameBusyGuard = "guard, busy (/decide every 100 ms)"
)

// Cost is one idle or busy phase: N processes of a kind, measured by pid.
type Cost struct {
	Name   string        `json:"name"`
	N      int           `json:"n"`
	Window time.Duration `json:"window"`
	// ServerCPU is etcd's and kube-apiserver's CPU over the window;
	// EtcdCPU the first's part of it.
	ServerCPU time.Duration `json:"serverCPU"`
	EtcdCPU   time.Duration `json:"etcdCPU"`
	// EtcdRSSKiB and APIServerRSSKiB are the servers' resident sets at
	// the window's end.
	EtcdRSSKiB      int64 `json:"etcdRSSKiB"`
	APIServerRSSKiB int64 `json:"apiServerRSSKiB"`
	// AdopterCPU is the adopters' own CPU over the window, summed.
	AdopterCPU time.Duration `json:"adopterCPU"`
	// RSSKiB is the adopters' mean resident set at the window's end.
	RSSKiB int64 `json:"rssKiB"`
	// Decide counts the busy variant's /decide answers: 200 (vouched),
	// 503 (not current) and failures.
	Decide200, Decide503, DecideErr int
}

// perProcessHour is the servers' CPU above baseline, in seconds per
// adopter-hour.
func (c Cost) perProcessHour(base Cost) float64 {
	if c.N == 0 {
		return 0
	}
	return (c.ServerCPU - base.ServerCPU).Seconds() / float64(c.N) / c.Window.Hours()
}

// cores is the servers' CPU above baseline extrapolated to replicas
// adopters, in cores.
func (c Cost) cores(base Cost, replicas int) float64 {
	return c.perProcessHour(base) * float64(replicas) / 3600
}

// Costs measures, in one run on one control plane, the servers' CPU with
// no adopter (baseline), n idle guard adopters (examples/consumer with no
// ConfigMap, so nothing asks Current()), n library-go idle processes and n
// busy guard adopters (/decide asked every 100 ms each: a caller relying
// on Current()). The restart fleet must be stopped first.
func (f *Fleet) Costs(ctx context.Context, idleBin string, n int, window time.Duration) ([]Cost, error) {
	etcd, apiserver, err := f.serverPIDs()
	if err != nil {
		return nil, err
	}
	servers := []int{etcd, apiserver}
	guard := func(i int, extra ...string) *Adopter {
		s := Spec{Name: fmt.Sprintf("idle-guard-%02d", i), Version: versionCurrent}
		return newAdopter(s, f.cfg.Consumer, f.consumerArgs(s, extra...))
	}
	var decide sync.Map // probe address → /decide address
	busy := func(i int) *Adopter {
		s := Spec{Name: fmt.Sprintf("busy-guard-%02d", i), Version: versionCurrent}
		args := f.consumerArgs(s)
		a := newAdopter(s, f.cfg.Consumer, func(version string, addrs []string) []string {
			decide.Store(addrs[0], addrs[1])
			return append(args(version, addrs), "--decide-bind-address="+addrs[1])
		})
		a.ports = 1
		return a
	}
	libraryGo := func(i int) *Adopter {
		return f.libraryGoAdopter(idleBin, Spec{Name: fmt.Sprintf("idle-librarygo-%02d", i), Version: versionCurrent})
	}
	var out []Cost
	for _, kind := range []struct {
		name string
		n    int
		mk   func(int) *Adopter
		busy bool
	}{
		{"baseline (no adopter)", 0, nil, false},
		{nameIdleGuard, n, func(i int) *Adopter { return guard(i) }, false},
		{"library-go FeatureGateAccess, idle", n, libraryGo, false},
		{nameBusyGuard, n, busy, true},
	} {
		c, err := f.cost(ctx, kind.name, kind.n, kind.mk, servers, window, kind.busy, &decide)
		if err != nil {
			return out, err
		}
		out = append(out, c)
	}
	return out, nil
}

func (f *Fleet) cost(ctx context.Context, name string, n int, mk func(int) *Adopter, servers []int, window time.Duration, busy bool, decide *sync.Map) (Cost, error) {
	c := Cost{Name: name, N: n, Window: window}
	var group []*Adopter
	defer func() {
		var wg sync.WaitGroup
		for _, a := range group {
			wg.Go(a.Stop)
		}
		wg.Wait()
	}()
	for i := range n {
		a := mk(i)
		group = append(group, a)
		a.Run()
	}
	if err := poll(ctx, f.settleTimeout(), 250*time.Millisecond, func() (bool, string) {
		for _, a := range group {
			if fs := a.Failures(); len(fs) > 0 {
				return false, fs[0]
			}
			if !a.Ready() {
				return false, a.Spec.Name + " not Ready"
			}
		}
		return true, ""
	}); err != nil {
		return c, fmt.Errorf("%s: %w", name, err)
	}
	if err := harness.Wait(ctx, warmup); err != nil {
		return c, err
	}
	pids := func() []int {
		var ps []int
		for _, a := range group {
			ps = append(ps, a.Current().Pid())
		}
		return ps
	}
	dctx, stopDeciders := context.WithCancel(ctx)
	var deciders sync.WaitGroup
	var mu sync.Mutex
	if busy {
		for _, a := range group {
			deciders.Go(func() {
				addr, _ := decide.Load(a.Current().Probe)
				code := askEvery(dctx, fmt.Sprintf("http://%s/decide", addr))
				mu.Lock()
				c.Decide200, c.Decide503, c.DecideErr = c.Decide200+code[200], c.Decide503+code[503], c.DecideErr+code[0]
				mu.Unlock()
			})
		}
	}
	// servers is etcd's pid, then kube-apiserver's.
	server0, etcd0, adopters0 := harness.CPUOf(servers), harness.CPUOf(servers[:1]), harness.CPUOf(pids())
	err := harness.Wait(ctx, window)
	c.ServerCPU, c.EtcdCPU, c.AdopterCPU = harness.CPUOf(servers)-server0, harness.CPUOf(servers[:1])-etcd0, harness.CPUOf(pids())-adopters0
	if m, err := harness.ProcStatus(servers[0]); err == nil {
		c.EtcdRSSKiB = m.RSS
	}
	if m, err := harness.ProcStatus(servers[1]); err == nil {
		c.APIServerRSSKiB = m.RSS
	}
	stopDeciders()
	deciders.Wait()
	if err != nil {
		return c, err
	}
	var rss int64
	for _, p := range pids() {
		if m, err := harness.ProcStatus(p); err == nil {
			rss += m.RSS
		}
	}
	if n > 0 {
		c.RSSKiB = rss / int64(n)
	}
	for _, a := range group {
		if a.Starts() != 1 {
			return c, fmt.Errorf("%s: %s started %d times during the window", name, a.Spec.Name, a.Starts())
		}
	}
	return c, nil
}

// decideClient keeps its connections: a caller asking every 100 ms does.
var decideClient = &http.Client{Timeout: 2 * time.Second}

// askEvery GETs url every decideInterval until ctx ends and counts the
// answers by status code (0: no answer).
func askEvery(ctx context.Context, url string) map[int]int {
	return askEach(ctx, url, decideInterval)
}

// askEach GETs url every interval until ctx ends and counts the answers by
// status code (0: no answer).
func askEach(ctx context.Context, url string, interval time.Duration) map[int]int {
	codes := map[int]int{}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return codes
		case <-t.C:
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := decideClient.Do(req)
		if err != nil {
			if ctx.Err() == nil {
				codes[0]++
			}
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes[resp.StatusCode]++
	}
}

// libraryGoAdopter runs test/librarygo's idle program (library-go's
// FeatureGateAccess, which consumes every gate of its version's entry and
// exits 0 at once when it changes) under the adopter loop.
func (f *Fleet) libraryGoAdopter(idleBin string, s Spec) *Adopter {
	s.Watched, s.WatchFeatureSet = nil, false
	a := newAdopter(s, idleBin, func(version string, addrs []string) []string {
		return []string{"--kubeconfig=" + f.kubeconfig, "--release-version=" + version, "--health-probe-bind-address=" + addrs[0]}
	})
	a.libraryGo = true
	return a
}

// AsLibraryGo replaces the stopped fleet's adopters by library-go ones on
// the same versions, for the same measurements on library-go's rule.
func (f *Fleet) AsLibraryGo(idleBin string) {
	for i, a := range f.Adopters {
		s := a.Spec
		s.Name, s.Version = "librarygo-"+s.Name, a.Version()
		f.Adopters[i] = f.libraryGoAdopter(idleBin, s)
	}
}

// AsBare replaces the stopped fleet's adopters by test/fleet/cmd/bare, the
// guard with nothing else to do, on the same versions and gates.
func (f *Fleet) AsBare(bareBin string) {
	for i, a := range f.Adopters {
		s := a.Spec
		s.Name, s.Version, s.WatchFeatureSet = "bare-"+s.Name, a.Version(), false
		f.Adopters[i] = newAdopter(s, bareBin, func(version string, addrs []string) []string {
			return []string{"--kubeconfig=" + f.kubeconfig, "--release-version=" + version, "--health-probe-bind-address=" + addrs[0],
				"--watched-gates=" + strings.Join(s.Watched, ","), "--zap-time-encoding=rfc3339nano"}
		})
	}
}
