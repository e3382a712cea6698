package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/faultproxy"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// Log lines of the guard's freshness proof.
var (
	logLapsed = harness.Contains(`"msg":"FeatureGate not proven current within the freshness bound; not current"`)
	logProven = harness.Contains(`"msg":"FeatureGate proven current again"`)
)

// freshnessBound is the guard's default bound, the one measured.
const freshnessBound = 2 * time.Second

// fault is one way to silence the operator's API server: start begins it,
// and the func it returns heals it.
type fault func() (heal func(), err error)

func (b *bench) measureFreshness(ctx context.Context) *section {
	sec := &section{Name: "freshness", Title: "Fault → Current false (the freshness deadline)"}
	sec.Method = []string{
		"Each fault leaves the operator's connection open and quiet, which no watch notices: " +
			"a **silent link** (a loopback proxy between the operator and the API server holds every byte both ways and closes nothing), " +
			"a **frozen API server** (SIGSTOP: the kernel still accepts connections, nothing answers), and an **API server cut from etcd** " +
			"(a second kube-apiserver whose etcd link goes through such a proxy: it keeps answering, HTTP/2 pings included). " +
			"One operator (default bound 2 s), applying a one-component payload every second and so asking `Current()` before each run level (a guard proves only while asked), runs through each; every run waits a random phase within one read period (1 s), starts the fault, " +
			"and takes the time of the operator's `FeatureGate not proven current` line, which it writes the moment `Current()` turns false; then heals the fault and waits for `FeatureGate proven current again`.",
		"The guard reads consistently every half bound; a read's answer is proof as of when it was sent, so `Current()` turns false between bound − period and bound after the fault starts, plus the time the last answered read took.",
	}
	silent := &series{Label: "link silent → `Current()` false", Short: "silent link -> not current", Target: freshnessBound}
	frozen := &series{Label: "API server frozen → `Current()` false", Short: "frozen API -> not current", Target: freshnessBound}
	cut := &series{Label: "API server cut from etcd → `Current()` false", Short: "cut from etcd -> not current", Target: freshnessBound}
	back := &series{Label: "fault healed → `proven current again` logged", Short: "healed -> current", NoChart: true}
	sec.Series = []*series{silent, frozen, cut, back}

	pl, err := b.featureGatePlane(ctx, "freshness")
	if err != nil {
		sec.Err = err
		return sec
	}
	defer pl.stop()
	var e errs
	runs := b.frac(3, 1)

	link, err := faultproxy.New(hostOf(pl.cfg))
	if err != nil {
		sec.Err = err
		return sec
	}
	defer link.Close()
	e.add(0, b.lapses(ctx, pl, "freshness-silent", viaHost(pl.cp.Config, link.Addr()), runs, silent, back, func() (func(), error) {
		link.Hold()
		return link.Release, nil
	}))

	e.add(1, b.lapses(ctx, pl, "freshness-frozen", pl.cp.Config, runs, frozen, back, func() (func(), error) {
		pid, err := controlplane.APIServerPID(pl.cp.Config)
		if err != nil {
			return nil, err
		}
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return nil, err
		}
		return func() { _ = syscall.Kill(pid, syscall.SIGCONT) }, nil
	}))

	etcdLink, err := faultproxy.New(pl.cp.EtcdURL().Host)
	if err != nil {
		sec.Err = err
		return sec
	}
	defer etcdLink.Close()
	twin, err := pl.cp.SecondAPIServerOn(&url.URL{Scheme: "http", Host: etcdLink.Addr()})
	if err != nil {
		e.add(2, err)
	} else {
		e.add(2, b.lapses(ctx, pl, "freshness-cut", twin.Config, runs, cut, back, func() (func(), error) {
			etcdLink.Hold()
			return etcdLink.Release, nil
		}))
		_ = twin.Stop()
	}
	for _, s := range []*series{silent, frozen, cut} {
		if sum := summarize(s.Values); sum.N > 0 {
			sec.Checks = append(sec.Checks, check{s.Label + ": ≤ 2 s (p99)", "p99 " + fmtDur(sum.P99) + ", p50 " + fmtDur(sum.P50), sum.P99 <= freshnessBound})
		}
	}
	rows, checks, err := b.freshnessCost(ctx)
	e.add(3, err)
	sec.Rows = append(sec.Rows, rows...)
	sec.Checks = append(sec.Checks, checks...)
	sec.Err = e.err()
	return sec
}

// lapses runs one operator reaching the API server through cfg and times,
// runs times, start → the lapse line, then heals and waits until it is
// current again.
func (b *bench) lapses(ctx context.Context, pl *plane, name string, cfg *rest.Config, runs int, lapse, back *series, start fault) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	via := *pl
	via.kubeconfig = filepath.Join(b.dir(name), "kubeconfig")
	if err := harness.WriteKubeconfig(via.kubeconfig, cfg); err != nil {
		return err
	}
	// An operator that relies on Current: it applies a one-component
	// payload every second, asking Current before each run level, so its
	// guard keeps proof (an idle one proves nothing and has nothing to
	// lapse).
	payload := filepath.Join(b.dir(name), "payload")
	if err := os.MkdirAll(payload, 0o755); err != nil {
		return err
	}
	if _, err := generatePayload(payload, 1); err != nil {
		return err
	}
	p, err := b.runningOperator(ctx, &via, name, "--manifests-dir="+payload, "--resync-period=1s")
	if err != nil {
		return err
	}
	defer p.Stop(10 * time.Second)
	period := freshnessBound / 2
	for i := 0; i < runs; i++ {
		if err := harness.Wait(ctx, period+rand.N(period)); err != nil {
			return err
		}
		from := p.Log.Len()
		heal, err := start()
		if err != nil {
			return err
		}
		started := time.Now()
		l, at, err := p.WaitLine(ctx, from, logLapsed)
		if err != nil {
			heal()
			return fmt.Errorf("run %d: no lapse: %w", i, err)
		}
		lapse.add(l.At().Sub(started))
		heal()
		healed := time.Now()
		l, _, err = p.WaitLine(ctx, at, logProven)
		if err != nil {
			return fmt.Errorf("run %d: not current again: %w", i, err)
		}
		back.add(l.At().Sub(healed))
	}
	if !p.Running() {
		return fmt.Errorf("%s exited during the faults", name)
	}
	return nil
}

// freshnessCost measures what the proof costs the control plane: replicas
// idle operators at the default bound against as many at a bound of an hour
// (a read every 30 min: none in the window, today's cost without it), each
// set alone on a fresh control plane, counting the API server's FeatureGate
// reads and the API server's and etcd's CPU over the idle window.
func (b *bench) freshnessCost(ctx context.Context) ([][2]string, []check, error) {
	const replicas = 10
	type cost struct {
		reads float64
		cpu   time.Duration
	}
	measure := func(name string, args ...string) (cost, error) {
		pl, err := b.featureGatePlane(ctx, name)
		if err != nil {
			return cost{}, err
		}
		defer pl.stop()
		var ps []*harness.Process
		defer func() {
			for _, p := range ps {
				p.Stop(10 * time.Second)
			}
		}()
		for i := range replicas {
			p, err := b.operator(pl, fmt.Sprintf("%s-%d", name, i), args...)
			if err != nil {
				return cost{}, err
			}
			ps = append(ps, p)
		}
		for _, p := range ps {
			if _, _, err := p.WaitLine(ctx, 0, harness.Contains(`"Manifests applied"`)); err != nil {
				return cost{}, err
			}
		}
		if err := harness.Wait(ctx, 5*time.Second); err != nil {
			return cost{}, err
		}
		pids := serverPIDs(pl)
		reads0, err := featureGateReads(ctx, pl.cfg)
		if err != nil {
			return cost{}, err
		}
		cpu0 := harness.CPUOf(pids)
		if err := harness.Wait(ctx, b.idle); err != nil {
			return cost{}, err
		}
		reads1, err := featureGateReads(ctx, pl.cfg)
		if err != nil {
			return cost{}, err
		}
		return cost{reads: reads1 - reads0, cpu: harness.CPUOf(pids) - cpu0}, nil
	}
	with, err := measure("freshness-cost-2s")
	if err != nil {
		return nil, nil, err
	}
	without, err := measure("freshness-cost-1h", "--featuregate-freshness-bound=1h")
	if err != nil {
		return nil, nil, err
	}
	perMinute := func(c cost) float64 { return c.reads / replicas / b.idle.Minutes() }
	perHour := func(d time.Duration) time.Duration {
		return time.Duration(float64(d) / replicas * float64(time.Hour) / float64(b.idle))
	}
	extra := perHour(with.cpu - without.cpu)
	rows := [][2]string{
		{fmt.Sprintf("FeatureGate reads (GETs and lists) per replica per minute (%d idle replicas, nothing asking `Current()`, %s)", replicas, b.idle),
			fmt.Sprintf("%.1f at the default bound (the guard proves only while asked; a fleet that asks: the Fleet section); %.1f with a bound of 1 h", perMinute(with), perMinute(without))},
		{"API server + etcd CPU per replica per hour",
			fmt.Sprintf("%s at the default bound; %s with a bound of 1 h; the proof costs %s", fmtDur(perHour(with.cpu)), fmtDur(perHour(without.cpu)), fmtDur(extra))},
		{"60 operators × 3 replicas in one cluster",
			fmt.Sprintf("%.0f reads per second; %.3f of a core of API server + etcd", 180*perMinute(with)/60, 180*extra.Seconds()/3600)},
	}
	// 180 replicas at 10 s each an hour would be half a percent of one
	// core: less than the API server's own idle load here.
	const target = 10 * time.Second
	checks := []check{{"the proof's API server + etcd CPU ≤ 10 s per replica per hour (180 replicas: ≤ 0.5 core)", fmtDur(extra), extra <= target}}
	return rows, checks, nil
}

// featureGateReads is the API server's count of GETs and LISTs of
// featuregates (the guard's proof is a list by name; informers list only
// when they start or relist), from its /metrics.
func featureGateReads(ctx context.Context, cfg *rest.Config) (float64, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("API server /metrics: %s", resp.Status)
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		read := strings.Contains(line, `verb="GET"`) || strings.Contains(line, `verb="LIST"`)
		if !read || !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="featuregates"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum, sc.Err()
}

func hostOf(cfg *rest.Config) string {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return cfg.Host
	}
	return u.Host
}

// viaHost is cfg reaching its API server at addr (a proxy in front of it).
func viaHost(cfg *rest.Config, addr string) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Host = "https://" + addr
	return c
}
