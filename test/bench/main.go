// Command bench measures what users of featuregate-operator feel, against
// the real local control plane (etcd and kube-apiserver from bin/k8s), and
// writes BENCHMARKS.md and a PNG chart of the latency distributions.
//
// It is not a test: nothing fails for being slow, and `make test` never
// runs it. Every measurement starts its own control plane; the operator runs
// as a real process (built at start unless -manager is given), and the
// harness times its own actions and reads the operator's JSON log
// timestamps, both on the same machine clock.
//
// It is a Go module of its own, run from this directory, so that its
// charting library (gonum.org/v1/plot) stays out of the operator's go.mod.
//
//	cd test/bench && go run . [-runs 30] [-only change,apply]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
	"github.com/featuregate-operator/operator/test/framework/mdsection"
)

// The FeatureGate the benchmarks change: status carries an entry for
// benchVersion (the operator runs with --release-version), and each change
// flips benchGate between enabled and disabled, which the CRD's CEL rules
// allow any number of times.
const (
	benchVersion = "4.99.0-bench"
	benchGate    = "BenchGate"
)

// groups are the measurement groups in report order; -only selects them.
var groups = []struct {
	name string
	run  func(b *bench, ctx context.Context) *section
}{
	{"change", (*bench).measureChange},
	{"ready", (*bench).measureReady},
	{"outage", (*bench).measureOutage},
	{"outage", (*bench).measureAfterOutage},
	{"freshness", (*bench).measureFreshness},
	{"apply", (*bench).measureApply},
	{"scaling", (*bench).measureScaling},
	{"handover", (*bench).measureHandover},
	{"kubelet", (*bench).measureKubelet},
}

type options struct {
	out, chart, manager, only, kubelet string
	runs                               int
	idle, timeout                      time.Duration
	keep                               bool
}

func main() {
	var o options
	flag.StringVar(&o.out, "out", "", "Report to write (default: BENCHMARKS.md at the repository root).")
	flag.StringVar(&o.chart, "chart", "", "PNG chart to write (default: docs/bench/latency.png beside -out).")
	flag.StringVar(&o.manager, "manager", "", "Operator binary (default: built from the checkout into a temporary directory).")
	flag.IntVar(&o.runs, "runs", 30, "Runs of the change measurement; the slower measurements do a fraction of it (ready, outage, handover: runs/3; handover without release: runs/6; apply: runs/6, at least 1).")
	flag.StringVar(&o.only, "only", "", "Comma-separated measurement groups to run (change, ready, outage, freshness, apply, scaling, handover, kubelet; footprint is part of apply). Empty: all.")
	flag.Func("scaling-sizes", "Payload sizes of the scaling measurement, comma-separated (default 100,800,3200,8000).", func(v string) error {
		var sizes []int
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < manifestsPerComp {
				return fmt.Errorf("%q: a size is a number of manifests, at least %d", f, manifestsPerComp)
			}
			sizes = append(sizes, n)
		}
		scalingSizes = sizes
		return nil
	})
	flag.StringVar(&o.kubelet, "kubelet", "", "The real-kubelet measurement `make bench-cluster` wrote (root); the report says why when it is missing.")
	flag.DurationVar(&o.idle, "idle", 60*time.Second, "Idle window over which the footprint measurement counts CPU time.")
	flag.DurationVar(&o.timeout, "timeout", 45*time.Minute, "Upper bound for the whole run.")
	flag.BoolVar(&o.keep, "keep", false, "Keep the temporary directory with every process's log.")
	flag.Parse()
	os.Exit(run(o))
}

func run(o options) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	// controller-runtime complains when its global logger is never set; the
	// in-process manager gets its own logger.
	ctrl.SetLogger(logr.Discard())

	selected, err := selectGroups(o.only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 2
	}
	tmp, err := os.MkdirTemp("", "featuregate-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	// Deferred in this order so that they run as: processes, control
	// planes, temporary directory.
	defer func() {
		if o.keep {
			fmt.Println("bench: logs kept in", tmp)
			return
		}
		_ = os.RemoveAll(tmp)
	}()
	defer stopAllPlanes()
	defer harness.StopAll(5 * time.Second)

	root, err := controlplane.Root()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	// The bench runs from its own module's directory, test/bench; its
	// report belongs at the root.
	if o.out == "" {
		o.out = filepath.Join(root, "BENCHMARKS.md")
	}
	b := &bench{tmp: tmp, root: root, linked: o.manager, kubelet: o.kubelet, runs: max(o.runs, 1), idle: o.idle, outDir: filepath.Dir(o.out), chartPath: o.chart}
	if b.chartPath == "" {
		b.chartPath = filepath.Join(b.outDir, "docs", "bench", "latency.png")
	}
	if b.linked == "" {
		b.linked = filepath.Join(tmp, "build", "manager")
		fmt.Println("bench: building the operator")
		if err := harness.BuildManager(ctx, b.linked); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
	} else if b.linked, err = filepath.Abs(b.linked); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	// The operator as deployed runs from an unpacked image layer, not from
	// the file the Go linker wrote through mmap; a process can map several
	// MiB more of a just-linked file than of a plain copy (0.1 to 6 MiB in
	// runs here).
	// So every measurement runs a copy (the footprint shows one run of the
	// linker's output beside it).
	b.manager = filepath.Join(tmp, "install", "manager")
	if err := install(b.linked, b.manager); err != nil {
		fmt.Fprintln(os.Stderr, "bench: install the operator:", err)
		return 1
	}

	rep := &report{Machine: describeMachine(root), Started: time.Now(), Args: os.Args[1:], Runs: b.runs}
	for _, g := range groups {
		if !selected[g.name] {
			continue
		}
		fmt.Printf("bench: %s\n", g.name)
		started := time.Now()
		sec := g.run(b, ctx)
		sec.Elapsed = time.Since(started)
		if sec.Err != nil {
			fmt.Fprintf(os.Stderr, "bench: %s: %v\n", g.name, sec.Err)
		}
		for _, s := range sec.Series {
			fmt.Printf("bench:   %-48s %s\n", s.Label, fmtSummary(summarize(s.Values)))
		}
		rep.Sections = append(rep.Sections, sec)
		if ctx.Err() != nil {
			break
		}
	}
	rep.Finished = time.Now()
	rep.Machine.LoadAfter = loadAvg()

	chart := b.chartPath
	rel, err := filepath.Rel(filepath.Dir(o.out), chart)
	if err != nil {
		rel = chart
	}
	rep.Chart = filepath.ToSlash(rel)
	// With nothing to draw there is no chart, and the report must not link
	// to one an earlier run left.
	drawn := len(chartRows(rep)) > 0
	if !drawn {
		rep.Chart = ""
	}
	code := 0
	if err := writeChart(chart, rep); err != nil {
		fmt.Fprintln(os.Stderr, "bench: chart:", err)
		code = 1
	}
	doc := rep.markdown()
	// The Fleet section is `make fleet`'s, the stampede's a before-and-after
	// of fleet runs, the TLS profile's the side-by-side e2e tests': kept as
	// they were measured.
	if old, err := os.ReadFile(o.out); err == nil {
		for _, kept := range []string{"Fleet", "Fleet: the stampede's load, before and after", "TLS profile",
			// make bench-librarygo's.
			"library-go's FeatureGateAccess beside librarygo.Access"} {
			if section := mdsection.Get(string(old), kept); section != "" {
				doc = mdsection.Put(doc, kept, section)
			}
		}
	}
	if err := os.WriteFile(o.out, []byte(doc), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if drawn {
		fmt.Printf("bench: wrote %s and %s\n", o.out, chart)
	} else {
		fmt.Printf("bench: wrote %s (no chart: nothing to draw)\n", o.out)
	}
	if ctx.Err() != nil {
		fmt.Fprintln(os.Stderr, "bench: interrupted:", context.Cause(ctx))
		return 1
	}
	return code
}

func selectGroups(only string) (map[string]bool, error) {
	selected := map[string]bool{}
	var names []string
	for _, g := range groups {
		names = append(names, g.name)
		selected[g.name] = only == ""
	}
	if only == "" {
		return selected, nil
	}
	for _, n := range strings.Split(only, ",") {
		n = strings.TrimSpace(n)
		if n == "footprint" {
			n = "apply"
		}
		if !slices.Contains(names, n) {
			return nil, fmt.Errorf("-only: unknown measurement %q (known: %s, footprint)", n, strings.Join(names, ", "))
		}
		selected[n] = true
	}
	return selected, nil
}

// bench holds what every measurement shares.
type bench struct {
	tmp, root string
	// manager is the operator every measurement runs: a copy of linked
	// installed into tmp as an image would install it (see install).
	manager, linked string
	// kubelet is the real-kubelet measurement's file (-kubelet).
	kubelet string
	// outDir holds the report; chartPath is its latency chart, beside
	// which the other charts go.
	outDir, chartPath string
	runs              int
	idle              time.Duration
	seq               int
	mu                sync.Mutex
}

func (b *bench) cpus() int { return runtime.NumCPU() }

// frac is the run count of a slower measurement: runs/div, at least least.
func (b *bench) frac(div, least int) int { return max(b.runs/div, least) }

// plane is a control plane with what the harness needs to use it.
type plane struct {
	cp         *controlplane.ControlPlane
	kubeconfig string
	cfg        *rest.Config
	c          client.Client
}

var planes struct {
	sync.Mutex
	all []*plane
}

var scheme = controlplane.Scheme()

// startPlane starts a fresh etcd and kube-apiserver with the OpenShift CRDs.
func (b *bench) startPlane(name string) (*plane, error) {
	dir := b.dir(name)
	out, err := os.Create(filepath.Join(dir, "controlplane.log"))
	if err != nil {
		return nil, err
	}
	cp, err := controlplane.Start(controlplane.Options{Dir: filepath.Join(dir, "cp"), Out: out})
	if err != nil {
		return nil, err
	}
	p := &plane{cp: cp, kubeconfig: filepath.Join(dir, "kubeconfig")}
	planes.Lock()
	planes.all = append(planes.all, p)
	planes.Unlock()
	if err := cp.WriteKubeconfig(p.kubeconfig); err != nil {
		return p, err
	}
	p.cfg = rest.CopyConfig(cp.Config)
	p.cfg.QPS, p.cfg.Burst = -1, 0 // no client-side throttling in the harness
	p.cfg.Timeout = 10 * time.Second
	p.c, err = client.New(p.cfg, client.Options{Scheme: scheme})
	return p, err
}

func (p *plane) stop() {
	if p.cp != nil {
		_ = p.cp.Stop()
		p.cp = nil
	}
}

func stopAllPlanes() {
	planes.Lock()
	defer planes.Unlock()
	for _, p := range planes.all {
		p.stop()
	}
}

// dir makes a fresh directory for one measurement's files.
func (b *bench) dir(name string) string {
	b.mu.Lock()
	b.seq++
	d := filepath.Join(b.tmp, fmt.Sprintf("%02d-%s", b.seq, name))
	b.mu.Unlock()
	_ = os.MkdirAll(d, 0o755)
	return d
}

// operator starts an operator process against pl, its output kept in the
// measurement's directory.
func (b *bench) operator(pl *plane, name string, args ...string) (*harness.Process, error) {
	return b.operatorFrom(b.manager, pl, name, args...)
}

// operatorFrom is operator running the binary bin.
func (b *bench) operatorFrom(bin string, pl *plane, name string, args ...string) (*harness.Process, error) {
	opts, err := harness.ManagerOptions(bin, name, pl.kubeconfig, append([]string{"--release-version=" + benchVersion}, args...)...)
	if err != nil {
		return nil, err
	}
	opts.LogFile = filepath.Join(b.dir(name), "operator.log")
	return harness.Start(opts)
}

// featureGatePlane is startPlane with FeatureGate/cluster created: the
// Default feature set, and a status entry for benchVersion with benchGate
// enabled.
func (b *bench) featureGatePlane(ctx context.Context, name string) (*plane, error) {
	pl, err := b.startPlane(name)
	if err != nil {
		return pl, err
	}
	if err := controlplane.CreateFeatureGate(ctx, pl.c, controlplane.FeatureGate("", controlplane.StatusGates(benchVersion, []string{benchGate}, nil))); err != nil {
		pl.stop()
		return nil, err
	}
	if err := warm(ctx, pl); err != nil {
		pl.stop()
		return nil, err
	}
	return pl, nil
}

// warm makes a fresh API server what a cluster's is: one that serves the
// FeatureGate and ClusterOperator watches already (in OpenShift,
// cluster-config-operator, the CVO and every operator watch them). The
// first streaming list of a resource a fresh API server has not watched yet
// waits about a second for its watch cache (measured here: 1.1 s, then
// 0.11 s); without this every operator start here would pay it, and no
// operator start in a cluster does.
func warm(ctx context.Context, pl *plane) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := cache.New(pl.cfg, cache.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	for _, obj := range []client.Object{&configv1.FeatureGate{}, &configv1.ClusterOperator{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("warm the API server: %w", err)
		}
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("warm the API server: watches not synced: %w", ctx.Err())
	}
	return nil
}

func gateDetails(enabled bool) configv1.FeatureGateDetails {
	if enabled {
		return controlplane.GateDetails(benchVersion, []string{benchGate}, nil)
	}
	return controlplane.GateDetails(benchVersion, nil, []string{benchGate})
}

// flip is a prepared change of the FeatureGate: the object to write, read
// beforehand so that the timed part is the update request alone.
type flip struct {
	fg      *configv1.FeatureGate
	enabled bool
}

func prepareFlip(ctx context.Context, c client.Client) (*flip, error) {
	fg := &configv1.FeatureGate{}
	if err := c.Get(ctx, client.ObjectKey{Name: "cluster"}, fg); err != nil {
		return nil, err
	}
	enabled := true
	for _, d := range fg.Status.FeatureGates {
		if d.Version == benchVersion {
			for _, a := range d.Enabled {
				if a.Name == benchGate {
					enabled = false
				}
			}
		}
	}
	fg.Status.FeatureGates = []configv1.FeatureGateDetails{gateDetails(enabled)}
	return &flip{fg: fg, enabled: enabled}, nil
}

// do sends the update and returns the time its response arrived.
func (f *flip) do(ctx context.Context, c client.Client) (time.Time, error) {
	_, resp, err := f.timed(ctx, c)
	return resp, err
}

// timed sends the update and returns when it was sent and when its
// response arrived. Watchers often hear of the change before the writer
// hears back, so the time sent is the reference that leaves both sides
// positive.
func (f *flip) timed(ctx context.Context, c client.Client) (sent, resp time.Time, err error) {
	sent = time.Now()
	if err := c.Status().Update(ctx, f.fg); err != nil {
		return sent, time.Time{}, fmt.Errorf("flip %s: %w", benchGate, err)
	}
	return sent, time.Now(), nil
}

// flipGate reads and flips in one go, when the read need not be excluded
// from a timing.
func flipGate(ctx context.Context, c client.Client) (time.Time, error) {
	f, err := prepareFlip(ctx, c)
	if err != nil {
		return time.Time{}, err
	}
	return f.do(ctx, c)
}

// pollAPI starts a GET of FeatureGate/cluster every interval, without
// waiting for those in flight, and returns when the first is answered 200.
// The GETs are plain HTTP: client-go would retry a 503 or 429 inside one
// call after its Retry-After, and "available" would be seen seconds late.
func pollAPI(ctx context.Context, cfg *rest.Config, interval time.Duration) (time.Time, error) {
	const maxInFlight = 100
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return time.Time{}, err
	}
	url := strings.TrimSuffix(cfg.Host, "/") + "/apis/config.openshift.io/v1/featuregates/cluster"
	answered := make(chan time.Time, 1)
	var inFlight atomic.Int32
	var lastErr atomic.Value
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if inFlight.Load() < maxInFlight {
			inFlight.Add(1)
			go func() {
				defer inFlight.Add(-1)
				rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
				defer rcancel()
				req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
				if err != nil {
					lastErr.Store(err.Error())
					return
				}
				resp, err := hc.Do(req)
				if err != nil {
					lastErr.Store(err.Error())
					return
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					lastErr.Store(resp.Status)
					return
				}
				select {
				case answered <- time.Now():
				default:
				}
			}()
		}
		select {
		case at := <-answered:
			return at, nil
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for the API server: %w (last error: %v)", ctx.Err(), lastErr.Load())
		case <-t.C:
		}
	}
}

// lease reads the leader election Lease; nil when it does not exist yet.
func lease(ctx context.Context, c client.Client, name string) (*coordinationv1.Lease, error) {
	l := &coordinationv1.Lease{}
	err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: name}, l)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return l, err
}

// errs collects run errors without stopping at the first: a measurement
// with a few failed runs still reports the others, and says so.
type errs struct{ list []error }

func (e *errs) add(run int, err error) {
	if err != nil {
		e.list = append(e.list, fmt.Errorf("run %d: %w", run, err))
	}
}

func (e *errs) err() error { return errors.Join(e.list...) }
