package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// scalingSizes are the payload sizes of the scaling measurement, in
// manifests; scalingBase is the size the growth is judged from.
var scalingSizes = []int{100, 800, 3200, 8000}

const (
	scalingBase = 800
	// scalingIdle is how long the operator idles after its first run
	// before its memory is read again; its resync period is a little
	// longer, so that the no-op run follows.
	scalingIdle   = 30 * time.Second
	scalingResync = scalingIdle + 5*time.Second
)

// scalePoint is what one payload size measured.
type scalePoint struct {
	manifests, included int
	// start → applied; kubectl's first apply (wall).
	operator, kubectl time.Duration
	// kube-apiserver + etcd CPU during each first apply, and during each
	// no-op re-apply (the operator's resync, kubectl's second run).
	opServer, kcServer, opNoopServer, kcNoopServer time.Duration
	// Write requests the API server counted during each no-op re-apply.
	opNoopWrites, kcNoopWrites int
	// Operator memory (VmRSS, KiB) once applied and after scalingIdle.
	rssApplied, rssIdle int64
	// lapses counts the guard's freshness lapses from start to the no-op
	// run's end: its API server at its busiest must not make it flap.
	lapses int
}

func (b *bench) measureScaling(ctx context.Context) *section {
	sec := &section{Name: "scaling", Title: "Cost as the payload grows: 100 to 8,000 manifests"}
	sec.Method = []string{
		fmt.Sprintf("The apply measurement's generator at %s manifests (%d per component; one component in %d TechPreviewNoUpgrade-only, so the operator applies nine in ten; "+
			"the first %d components have a CRD, the others a ConfigMap in its place, as a real payload's CRDs do not grow with it). "+
			"One run per size: the operator (`--resync-period=%s`) into a fresh control plane, then kubectl (`apply --server-side -f DIR`, the same included files) into another. "+
			"Start → applied is process start to the `Manifests applied` line (kubectl: its wall time). "+
			"API server CPU is kube-apiserver + etcd CPU time from /proc, sampled every %s: for the operator's first apply from its start to its `Manifests applied` line, "+
			"for its no-op resync over the run's logged duration; for kubectl over each of its two runs (the second is its no-op re-apply). "+
			"Writes are the API server's own count (`apiserver_request_total`, every verb but GET, LIST and WATCH, on every resource but the operator's leases, Events and ClusterOperator). "+
			"RSS is VmRSS when the first run is logged and again after %s idle.",
			strings.Trim(strings.Join(strings.Fields(fmt.Sprint(scalingSizes)), ", "), "[]"), manifestsPerComp, techPreviewShare, payloadCRDs, scalingResync, fmtDur(cpuSampling), scalingIdle),
	}
	var points []scalePoint
	var e errs
	for i, size := range scalingSizes {
		if ctx.Err() != nil {
			break
		}
		pt, err := b.scaleRun(ctx, size)
		e.add(i, err)
		if err == nil {
			points = append(points, pt)
			fmt.Printf("bench:   %5d manifests: operator %s, kubectl %s, RSS %s idle; no-op writes %d, server CPU %s (kubectl %s)\n",
				size, fmtDur(pt.operator), fmtDur(pt.kubectl), mib(pt.rssIdle), pt.opNoopWrites, fmtDur(pt.opNoopServer), fmtDur(pt.kcNoopServer))
		}
	}
	sec.Err = e.err()
	sec.Table = scalingTable(points)
	sec.Rows, sec.Checks = scalingVerdicts(points)
	if len(points) > 1 {
		chart := filepath.Join(filepath.Dir(b.chartPath), "scaling.png")
		rel, err := filepath.Rel(b.outDir, chart)
		if err != nil {
			rel = chart
		}
		var op, kc line
		op.Name, kc.Name = "operator: start → applied", "kubectl apply --server-side"
		for _, p := range points {
			op.Points = append(op.Points, [2]float64{float64(p.manifests), p.operator.Seconds()})
			kc.Points = append(kc.Points, [2]float64{float64(p.manifests), p.kubectl.Seconds()})
		}
		if err := writeLineChart(chart, "First apply by payload size", "manifests in the payload", "seconds", true, true, []line{op, kc}); err != nil {
			sec.Err = fmt.Errorf("scaling chart: %w", err)
		} else {
			sec.Images = append(sec.Images, filepath.ToSlash(rel))
		}
	}
	return sec
}

// scaleRun measures one payload size.
func (b *bench) scaleRun(ctx context.Context, size int) (scalePoint, error) {
	pt := scalePoint{manifests: size}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	dir := b.dir(fmt.Sprintf("scale-%d", size))
	payload, kubectlDir := filepath.Join(dir, "payload"), filepath.Join(dir, "kubectl")
	for _, d := range []string{payload, kubectlDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return pt, err
		}
	}
	if _, err := generatePayload(payload, size/manifestsPerComp); err != nil {
		return pt, err
	}
	included, err := copyIncluded(payload, kubectlDir)
	if err != nil {
		return pt, err
	}
	pt.included = included

	// The operator.
	pl, err := b.featureGatePlane(ctx, fmt.Sprintf("scale-%d-operator", size))
	if err != nil {
		return pt, err
	}
	defer pl.stop()
	cpu := sampleCPU(ctx, serverPIDs(pl))
	p, err := b.operator(pl, fmt.Sprintf("scale-%d", size), "--manifests-dir="+payload, "--resync-period="+scalingResync.String())
	if err != nil {
		return pt, err
	}
	defer p.Stop(10 * time.Second)
	a, i, err := firstRun(ctx, p, included)
	if err != nil {
		return pt, err
	}
	first := a.line
	pt.operator = first.At().Sub(p.Started())
	m, err := harness.ProcStatus(p.Pid())
	if err != nil {
		return pt, err
	}
	pt.rssApplied = m.RSS
	if err := harness.Wait(ctx, scalingIdle); err != nil {
		return pt, err
	}
	if m, err = harness.ProcStatus(p.Pid()); err != nil {
		return pt, err
	}
	pt.rssIdle = m.RSS
	w0, err := serverWrites(ctx, pl.cfg)
	if err != nil {
		return pt, err
	}
	noop, _, err := nextRun(ctx, p, i+1)
	if err != nil {
		return pt, err
	}
	second := noop.line
	w1, err := serverWrites(ctx, pl.cfg)
	if err != nil {
		return pt, err
	}
	pt.opNoopWrites = w1 - w0
	pt.lapses = p.Log.CountWhere(logLapsed)
	if noop.unchanged != included {
		return pt, fmt.Errorf("the no-op run found %d of %d objects unchanged; see %s", noop.unchanged, included, p.LogPath())
	}
	// Sampled on the way: the apply runs start to end, each window ending
	// at its log line (the no-op run starts its logged duration earlier).
	time.Sleep(2 * cpuSampling)
	pt.opServer = cpu.at(first.At()) - cpu.at(p.Started())
	pt.opNoopServer = cpu.at(second.At()) - cpu.at(second.At().Add(-noop.duration))
	p.Stop(10 * time.Second)
	pl.stop()

	// kubectl, into a plane of its own.
	kp, err := b.startPlane(fmt.Sprintf("scale-%d-kubectl", size))
	if err != nil {
		return pt, err
	}
	defer kp.stop()
	servers := serverPIDs(kp)
	for pass := range 2 {
		out := filepath.Join(b.dir(fmt.Sprintf("scale-%d-kubectl-%d", size, pass)), "kubectl.log")
		w0, err := serverWrites(ctx, kp.cfg)
		if err != nil {
			return pt, err
		}
		c0 := harness.CPUOf(servers)
		res, err := kubectlApply(ctx, kp.cp.Kubectl(), kp.kubeconfig, kubectlDir, out)
		if err != nil {
			return pt, err
		}
		if res.objects != included {
			return pt, fmt.Errorf("kubectl applied %d objects, want %d; see %s", res.objects, included, out)
		}
		c1 := harness.CPUOf(servers)
		if pass == 0 {
			pt.kubectl, pt.kcServer = res.wall, c1-c0
			continue
		}
		w1, err := serverWrites(ctx, kp.cfg)
		if err != nil {
			return pt, err
		}
		pt.kcNoopServer, pt.kcNoopWrites = c1-c0, w1-w0
	}
	return pt, nil
}

// cpuSampling is how often sampleCPU reads the processes' CPU time.
const cpuSampling = 50 * time.Millisecond

// cpuTimeline is the CPU time of some processes, sampled until its context
// ends, so that a window known only afterwards (a run that ends with its
// log line and logs its duration) can be measured.
type cpuTimeline struct {
	mu      sync.Mutex
	times   []time.Time
	samples []time.Duration
}

func sampleCPU(ctx context.Context, pids []int) *cpuTimeline {
	tl := &cpuTimeline{}
	record := func() {
		d := harness.CPUOf(pids)
		tl.mu.Lock()
		tl.times, tl.samples = append(tl.times, time.Now()), append(tl.samples, d)
		tl.mu.Unlock()
	}
	record()
	go func() {
		t := time.NewTicker(cpuSampling)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				record()
			}
		}
	}()
	return tl
}

// at is the CPU time used by t: the last sample taken at or before it.
func (tl *cpuTimeline) at(t time.Time) time.Duration {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	i := sort.Search(len(tl.times), func(i int) bool { return tl.times[i].After(t) })
	if i == 0 {
		return 0
	}
	return tl.samples[i-1]
}

// scalingTable is the section's table, a row per size.
func scalingTable(points []scalePoint) [][]string {
	if len(points) == 0 {
		return nil
	}
	t := [][]string{{"manifests (applied)", "operator: start → applied", "kubectl", "kubectl / operator", "API server CPU, first apply: operator / kubectl",
		"no-op re-apply: writes, API server CPU: operator / kubectl", "operator RSS: applied / idle"}}
	for _, p := range points {
		t = append(t, []string{
			fmt.Sprintf("%d (%d)", p.manifests, p.included),
			fmtDur(p.operator), fmtDur(p.kubectl), fmtRatio(ratio(p.kubectl, p.operator)),
			fmt.Sprintf("%s / %s", fmtDur(p.opServer), fmtDur(p.kcServer)),
			fmt.Sprintf("%d, %s / %d, %s", p.opNoopWrites, fmtDur(p.opNoopServer), p.kcNoopWrites, fmtDur(p.kcNoopServer)),
			fmt.Sprintf("%s / %s", mib(p.rssApplied), mib(p.rssIdle)),
		})
	}
	return t
}

// scalingVerdicts are the growth rows and the targets, each
// checked on this run's points.
func scalingVerdicts(points []scalePoint) ([][2]string, []check) {
	at := map[int]scalePoint{}
	for _, p := range points {
		at[p.manifests] = p
	}
	var rows [][2]string
	var checks []check
	base, okBase := at[scalingBase]
	top, okTop := at[scalingSizes[len(scalingSizes)-1]]
	if okBase && okTop && top.manifests > base.manifests {
		per := float64(top.manifests-base.manifests) / 1000
		rows = append(rows,
			[2]string{"Growth per 1,000 manifests (800 → 8,000)", fmt.Sprintf("start → applied +%s, API server CPU +%s, idle RSS +%.1f MiB",
				fmtDur(time.Duration(float64(top.operator-base.operator)/per)), fmtDur(time.Duration(float64(top.opServer-base.opServer)/per)),
				float64(top.rssIdle-base.rssIdle)/1024/per)})
		linear := float64(top.manifests) / float64(base.manifests)
		got := ratio(top.operator, base.operator)
		checks = append(checks, check{fmt.Sprintf("start → applied from %d to %d within 1.2× of linear (≤ %.1f×)", base.manifests, top.manifests, 1.2*linear),
			fmt.Sprintf("%.1f× (%s → %s)", got, fmtDur(base.operator), fmtDur(top.operator)), got <= 1.2*linear})
		checks = append(checks, check{fmt.Sprintf("idle RSS with %d manifests applied ≤ 64 MiB", top.manifests), mib(top.rssIdle), top.rssIdle <= 64*1024})
	}
	if okBase {
		checks = append(checks, check{fmt.Sprintf("no-op resync of %d objects: zero writes", base.included),
			fmt.Sprintf("%d writes (kubectl's no-op re-apply: %d)", base.opNoopWrites, base.kcNoopWrites), base.opNoopWrites == 0})
		r := ratio(base.kcNoopServer, base.opNoopServer)
		checks = append(checks, check{fmt.Sprintf("no-op resync of %d objects: ≤ 1/10 of the API server CPU of kubectl's no-op re-apply", base.included),
			fmt.Sprintf("operator %s, kubectl %s: 1/%.1f", fmtDur(base.opNoopServer), fmtDur(base.kcNoopServer), r), r >= 10})
	}
	if okTop {
		checks = append(checks, check{fmt.Sprintf("the guard's proof never lapses while %d manifests are applied and resynced (Current() never false without a fault)", top.manifests),
			fmt.Sprintf("%d lapses", top.lapses), top.lapses == 0})
	}
	for _, p := range points {
		r := ratio(p.kubectl, p.operator)
		checks = append(checks, check{fmt.Sprintf("first apply of %d manifests ≥ 1.5× faster than kubectl", p.manifests),
			fmt.Sprintf("%s (operator %s, kubectl %s)", fmtRatio(r), fmtDur(p.operator), fmtDur(p.kubectl)), r >= 1.5})
	}
	return rows, checks
}

// serverWrites is the number of write requests the API server has served
// since it started, by its own count, leaving out what any operator writes
// to report (its Lease, Events, ClusterOperator): what is left are the
// payload's objects.
func serverWrites(ctx context.Context, cfg *rest.Config) (int, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return 0, fmt.Errorf("API server metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return 0, fmt.Errorf("API server metrics: %w", err)
	}
	return countWrites(families["apiserver_request_total"]), nil
}

// countWrites sums apiserver_request_total over the write verbs, leaving
// out the reporting resources.
func countWrites(f *dto.MetricFamily) int {
	if f == nil {
		return 0
	}
	reads := map[string]bool{"GET": true, "LIST": true, "WATCH": true, "CONNECT": true}
	reporting := map[string]bool{"leases": true, "events": true, "clusteroperators": true}
	n := 0.0
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if reads[labels["verb"]] || reporting[labels["resource"]] {
			continue
		}
		n += m.GetCounter().GetValue()
	}
	return int(n)
}
