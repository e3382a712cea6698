package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// appliedLine is what the applier logs after each run.
type appliedLine struct {
	line                     harness.Line
	applied, failed, invalid int
	excluded, unchanged      int
	duration                 time.Duration
}

func parseApplied(l harness.Line) (appliedLine, error) {
	var f struct {
		Applied, Failed, Invalid, Excluded, Unchanged int
		Duration                                      string
	}
	if err := json.Unmarshal([]byte(l.Raw), &f); err != nil {
		return appliedLine{}, fmt.Errorf("parse the Manifests applied line: %w", err)
	}
	d, err := time.ParseDuration(f.Duration)
	if err != nil {
		return appliedLine{}, fmt.Errorf("parse the Manifests applied line: duration: %w", err)
	}
	return appliedLine{line: l, applied: f.Applied, failed: f.Failed, invalid: f.Invalid, excluded: f.Excluded, unchanged: f.Unchanged, duration: d}, nil
}

// nextRun waits for the operator's first `Manifests applied` line at index
// from or later, and returns the run it logs and the line's index.
func nextRun(ctx context.Context, p *harness.Process, from int) (appliedLine, int, error) {
	l, i, err := p.WaitLine(ctx, from, harness.Contains(`"Manifests applied"`))
	if err != nil {
		return appliedLine{}, i, err
	}
	a, err := parseApplied(l)
	return a, i, err
}

// firstRun is the operator's first run, checked: it applied the included
// manifests and nothing failed.
func firstRun(ctx context.Context, p *harness.Process, included int) (appliedLine, int, error) {
	a, i, err := nextRun(ctx, p, 0)
	if err != nil {
		return a, i, err
	}
	if a.failed > 0 || a.invalid > 0 || a.applied != included {
		return a, i, fmt.Errorf("operator applied %d, failed %d, invalid %d (want %d applied); see %s", a.applied, a.failed, a.invalid, included, p.LogPath())
	}
	return a, i, nil
}

// applyStats gathers the apply measurement's distributions.
type applyStats struct {
	opStart, opRun, opSnap, kc, opNoop, kcNoop *series
	// CPU time of the client and of the control plane (kube-apiserver and
	// etcd) during each first apply, with its wall time.
	opCPU, opServerCPU, opWall, kcCPU, kcServerCPU, kcWall []time.Duration
	noopCPU                                                []time.Duration // operator, one no-op re-apply (plus ~3 s idle)
}

func (b *bench) measureApply(ctx context.Context) *section {
	sec := &section{Name: "apply", Title: "Applying an 800-manifest payload"}
	reps := b.frac(6, 1)
	st := &applyStats{
		opStart: &series{Label: "operator: process start → `Manifests applied` logged", Short: "apply: operator (start->done)"},
		opRun:   &series{Label: "operator: the apply run itself (logged duration)", Short: "apply: operator run (logged)"},
		opSnap:  &series{Label: "operator: `Startup snapshot taken` → `Manifests applied`", Short: "apply: operator (snap->done)"},
		kc:      &series{Label: "kubectl apply --server-side -f DIR (wall)", Short: "apply: kubectl"},
		opNoop:  &series{Label: "operator: no-op re-apply (second run, logged duration)", Short: "re-apply: operator (logged)"},
		kcNoop:  &series{Label: "kubectl: no-op re-apply (wall)", Short: "re-apply: kubectl"},
	}
	sec.Series = []*series{st.opStart, st.opRun, st.opSnap, st.kc, st.opNoop, st.kcNoop}

	dir := b.dir("payload")
	payload, kubectlDir := filepath.Join(dir, "payload"), filepath.Join(dir, "kubectl")
	for _, d := range []string{payload, kubectlDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			sec.Err = err
			return sec
		}
	}
	ps, err := generatePayload(payload, payloadComponents)
	if err != nil {
		sec.Err = err
		return sec
	}
	included, err := copyIncluded(payload, kubectlDir)
	if err != nil {
		sec.Err = err
		return sec
	}
	var kinds []string
	for k, n := range ps.Kinds {
		kinds = append(kinds, fmt.Sprintf("%d %s", n, k))
	}
	sort.Strings(kinds)
	sec.Method = []string{
		fmt.Sprintf("A generated payload of %d files, one manifest each, named like a release payload (`0000_NN_<component>_NN_<what>.yaml`): %s. "+
			"%d of them (%d of %d components) are TechPreviewNoUpgrade-only, half through `%s`, half through the 4.10 spelling of `%s`, so under the Default feature set "+
			"the operator applies %d. kubectl gets a directory with exactly those %d files (chosen by the operator's own `manifest.Include`). "+
			"CRDs are in run level 0000_03 and namespaces in 0000_05, ahead of the components' levels (10–90): within a run level the operator applies in parallel, "+
			"so an object next to its namespace in the same level would race.",
			ps.Files, strings.Join(kinds, ", "), ps.Gated, payloadComponents/techPreviewShare, payloadComponents, "release.openshift.io/feature-set", "release.openshift.io/feature-gate", included, included),
		fmt.Sprintf("Each of the %d repetitions starts two fresh control planes, one for the operator (`--manifests-dir`, `--resync-period=3s` so that a second, no-op run follows) "+
			"and one for `kubectl apply --server-side -f DIR` with the project's kubectl (`bin/k8s/kubectl`); the two alternate in order. "+
			"Both apply as admin (system:masters). The operator applies run level by run level, up to 8 manifests of a level at once; kubectl applies one object after the other. "+
			"The fair comparison is whole process against whole process: kubectl's wall time includes its start and discovery, "+
			"so the operator's includes its start, snapshot read and ClusterOperator status write (process start → `Manifests applied` log line); "+
			"the logged run duration is shown too. The no-op re-apply is the operator's second run (drift check) against kubectl run a second time. "+
			"CPU time is read from /proc for the client and for the control plane's kube-apiserver and etcd.", reps),
		fmt.Sprintf("Footprint: after the last repetition, an operator with the default resync period starts against the control plane holding the applied payload, "+
			"and its memory is read %s after its first (no-op) run and again after the idle window; then %d operators without `--manifests-dir`, one after the other, "+
			"each read %s after its first run (VmRSS, RssAnon and RssFile from /proc/<pid>/status, the binary's resident pages from /proc/<pid>/smaps). "+
			"Every measurement runs a copy of the operator binary written with write(2), as a node unpacks an image layer: "+
			"a process can map several MiB more of a file the Go linker has just written through mmap (from 0.1 to 6 MiB in runs here; one run of that file is shown for comparison).", fmtDur(idleSettle), bareRuns, fmtDur(idleSettle)),
	}
	var e errs
	var foot *plane
	defer func() {
		if foot != nil {
			foot.stop()
		}
	}()
	for r := 0; r < reps && ctx.Err() == nil; r++ {
		last := r == reps-1
		kubectlFirst := r%2 == 1
		if kubectlFirst {
			e.add(r, b.kubectlRep(ctx, r, kubectlDir, included, st))
		}
		pl, err := b.operatorApplyRep(ctx, r, payload, included, st)
		e.add(r, err)
		if pl != nil {
			if last && err == nil {
				foot = pl
			} else {
				pl.stop()
			}
		}
		if !kubectlFirst {
			e.add(r, b.kubectlRep(ctx, r, kubectlDir, included, st))
		}
	}
	if foot != nil && ctx.Err() == nil {
		rows, checks, err := b.footprint(ctx, foot, payload, st.noopCPU)
		sec.Rows, sec.Checks = append(sec.Rows, rows...), append(sec.Checks, checks...)
		e.add(reps-1, err)
		foot.stop()
		foot = nil
	}
	sec.Err = e.err()

	ops, k := summarize(st.opStart.Values), summarize(st.kc.Values)
	if ops.N > 0 && k.N > 0 {
		r := ratio(k.P50, ops.P50)
		sec.Checks = append([]check{{"≥ 2× faster than kubectl (median kubectl / median operator, start → applied)",
			fmt.Sprintf("%s (operator %s, kubectl %s; against the logged run alone: %s)", fmtRatio(r), fmtDur(ops.P50), fmtDur(k.P50), fmtRatio(ratio(k.P50, summarize(st.opRun.Values).P50))), r >= 2}}, sec.Checks...)
	}
	if on, kn := summarize(st.opNoop.Values), summarize(st.kcNoop.Values); on.N > 0 && kn.N > 0 {
		sec.Notes = append(sec.Notes, fmt.Sprintf("No-op re-apply: operator %s, kubectl %s: %s faster.", fmtDur(on.P50), fmtDur(kn.P50), fmtRatio(ratio(kn.P50, on.P50))))
	}
	cpuRow := func(who string, client, server, wall []time.Duration) [2]string {
		c, sv, w := summarize(client).P50, summarize(server).P50, summarize(wall).P50
		return [2]string{"CPU during the first apply: " + who, fmt.Sprintf("client %s, kube-apiserver + etcd %s over %s wall: the control plane kept %.1f of %d CPUs busy (medians of %d)",
			c.Round(10*time.Millisecond), sv.Round(10*time.Millisecond), fmtDur(w), ratio(sv, w), b.cpus(), len(wall))}
	}
	var cpuRows [][2]string
	if len(st.opWall) > 0 {
		cpuRows = append(cpuRows, cpuRow("operator", st.opCPU, st.opServerCPU, st.opWall))
	}
	if len(st.kcWall) > 0 {
		cpuRows = append(cpuRows, cpuRow("kubectl", st.kcCPU, st.kcServerCPU, st.kcWall))
	}
	sec.Rows = append(cpuRows, sec.Rows...)
	return sec
}

// serverPIDs are the plane's etcd and kube-apiserver processes: both carry
// etcd's client address on their command line.
func serverPIDs(pl *plane) []int {
	return harness.PIDsMatching(pl.cp.Env.ControlPlane.Etcd.URL.Host)
}

// operatorApplyRep applies the payload with the operator into a fresh
// control plane, which it returns (running) for the footprint.
func (b *bench) operatorApplyRep(ctx context.Context, r int, payload string, included int, st *applyStats) (*plane, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	pl, err := b.featureGatePlane(ctx, fmt.Sprintf("apply-operator-%d", r))
	if err != nil {
		return pl, err
	}
	servers := serverPIDs(pl)
	server0 := harness.CPUOf(servers)
	p, err := b.operator(pl, fmt.Sprintf("apply-%d", r), "--manifests-dir="+payload, "--resync-period=3s")
	if err != nil {
		return pl, err
	}
	defer p.Stop(10 * time.Second)
	a, i, err := firstRun(ctx, p, included)
	if err != nil {
		return pl, err
	}
	cpu0, err := harness.ProcCPU(p.Pid())
	if err != nil {
		return pl, err
	}
	server1 := harness.CPUOf(servers)
	first := a.line
	wall := first.At().Sub(p.Started())
	st.opStart.add(wall)
	st.opRun.add(a.duration)
	st.opCPU, st.opServerCPU, st.opWall = append(st.opCPU, cpu0), append(st.opServerCPU, server1-server0), append(st.opWall, wall)
	if l, ok := p.Log.Find(harness.Contains("Startup snapshot taken")); ok {
		st.opSnap.add(first.At().Sub(l.At()))
	}
	a2, _, err := nextRun(ctx, p, i+1)
	if err != nil {
		return pl, err
	}
	if a2.failed > 0 {
		return pl, fmt.Errorf("operator re-apply: %d failed", a2.failed)
	}
	st.opNoop.add(a2.duration)
	if cpu1, err := harness.ProcCPU(p.Pid()); err == nil {
		st.noopCPU = append(st.noopCPU, cpu1-cpu0)
	}
	return pl, nil
}

// kubectlRep applies the same manifests with kubectl into a fresh control
// plane, twice.
func (b *bench) kubectlRep(ctx context.Context, r int, dir string, included int, st *applyStats) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	pl, err := b.startPlane(fmt.Sprintf("apply-kubectl-%d", r))
	if err != nil {
		return err
	}
	defer pl.stop()
	servers := serverPIDs(pl)
	for pass, ser := range []*series{st.kc, st.kcNoop} {
		out := filepath.Join(b.dir(fmt.Sprintf("kubectl-%d-%d", r, pass)), "kubectl.log")
		server0 := harness.CPUOf(servers)
		res, err := kubectlApply(ctx, pl.cp.Kubectl(), pl.kubeconfig, dir, out)
		if err != nil {
			return err
		}
		if res.objects != included {
			return fmt.Errorf("kubectl applied %d objects, want %d; see %s", res.objects, included, out)
		}
		ser.add(res.wall)
		if pass == 0 {
			st.kcCPU, st.kcServerCPU, st.kcWall = append(st.kcCPU, res.cpu), append(st.kcServerCPU, harness.CPUOf(servers)-server0), append(st.kcWall, res.wall)
		}
	}
	return nil
}

type kubectlResult struct {
	wall, cpu time.Duration
	objects   int
}

// kubectlApply runs kubectl apply --server-side and returns its wall and
// CPU time and how many objects it reported.
func kubectlApply(ctx context.Context, kubectl, kubeconfig, dir, logPath string) (kubectlResult, error) {
	var res kubectlResult
	f, err := os.Create(logPath)
	if err != nil {
		return res, err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig="+kubeconfig, "apply", "--server-side", "-f", dir)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return res, err
	}
	cmd.Stderr = f
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return res, err
	}
	sc := bufio.NewScanner(io.TeeReader(stdout, f))
	for sc.Scan() {
		if strings.Contains(sc.Text(), "serverside-applied") {
			res.objects++
		}
	}
	err = cmd.Wait()
	res.wall = time.Since(started)
	if err != nil {
		return res, fmt.Errorf("kubectl apply: %w; see %s", err, logPath)
	}
	res.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	return res, nil
}
