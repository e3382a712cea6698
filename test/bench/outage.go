package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// apiPoll is how often the harness starts a read to see whether the API
// server answers again; it bounds how late "API available" is seen.
const apiPoll = 10 * time.Millisecond

// restartAPI starts the first API server again and returns the time the
// harness's first read through it succeeded.
func restartAPI(ctx context.Context, pl *plane) (time.Time, error) {
	started := make(chan error, 1)
	go func() { started <- pl.cp.StartAPIServer() }()
	apiAt, err := pollAPI(ctx, pl.cfg, apiPoll)
	if err != nil {
		return time.Time{}, err
	}
	select {
	case err := <-started:
		if err != nil {
			return time.Time{}, fmt.Errorf("restart the API server: %w", err)
		}
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
	return apiAt, nil
}

func (b *bench) measureReady(ctx context.Context) *section {
	sec := &section{Name: "ready", Title: "API available → ready"}
	sec.Method = []string{
		"One control plane; every run stops the API server (etcd stays), starts a fresh operator with the default flags, waits until it has logged a refused read and 1 s more, " +
			"waits a delay that spreads the runs evenly over one retry interval (50 ms), then starts the API server again on the same port. " +
			"\"API available\": the first successful GET of the FeatureGate through it by the harness, which starts one every 10 ms from before the restart without waiting for those in flight. " +
			"Ready: the first `/readyz` 200, polled every 5 ms. A refused connection, and a starting kube-apiserver's \"paths not installed yet\", are read again after 50 ms; " +
			"other answers from a server back off exponentially up to `--initial-fetch-backoff-cap` (2 s); a read unanswered for 100 ms gets a second one beside it.",
		"Log volume: an operator started with the API down for 30 s, its retry lines (and all its lines) counted, nothing probing it.",
	}
	const target = 250 * time.Millisecond
	ready := &series{Label: "default flags: API available → /readyz 200", Short: "ready (default flags)", Target: target}
	snapLog := &series{Label: "API available → `Startup snapshot taken` logged", NoChart: true}
	sec.Series = []*series{ready, snapLog}
	pl, err := b.featureGatePlane(ctx, "ready")
	if err != nil {
		sec.Err = err
		return sec
	}
	defer pl.stop()
	var e errs
	runs := b.frac(3, 1)
	for i := 0; i < runs && ctx.Err() == nil; i++ {
		// Spread the moment the API returns evenly over one retry
		// interval: the API server's own start time is nearly constant,
		// and would otherwise hit the same phase every run.
		phase := time.Duration(float64(50*time.Millisecond) * (float64(i) + 0.5) / float64(runs))
		e.add(i, b.readyRun(ctx, pl, fmt.Sprintf("ready-%d", i), phase, ready, snapLog))
	}
	if s := summarize(ready.Values); s.N > 0 {
		sec.Checks = append(sec.Checks, check{"≤ 250 ms (p99), default flags", "p99 " + fmtDur(s.P99) + ", p50 " + fmtDur(s.P50), s.P99 <= target})
	}
	if retries, all, err := b.logVolume(ctx, pl, 30*time.Second); err != nil {
		e.add(runs, err)
	} else {
		sec.Rows = append(sec.Rows, [2]string{"log lines during a 30 s outage at start", fmt.Sprintf("%d retry lines (%.0f per minute), %d lines in all", retries, float64(retries)*2, all)})
	}
	sec.Err = e.err()
	return sec
}

// readyRun times one start with the API down.
func (b *bench) readyRun(ctx context.Context, pl *plane, name string, phase time.Duration, ser, snapLog *series) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := pl.cp.StopAPIServer(); err != nil {
		return fmt.Errorf("stop the API server: %w", err)
	}
	p, err := b.operator(pl, name)
	if err != nil {
		_, _ = restartAPI(ctx, pl)
		return err
	}
	defer p.Stop(10 * time.Second)
	if _, _, err := p.WaitLine(ctx, 0, harness.Contains("connection refused")); err != nil {
		_, _ = restartAPI(ctx, pl)
		return err
	}
	if err := harness.Wait(ctx, time.Second+phase); err != nil {
		_, _ = restartAPI(ctx, pl)
		return err
	}
	// Readiness is polled from before the restart: restartAPI returns only
	// once the API server reports itself healthy, well after it answers.
	type result struct {
		at  time.Time
		err error
	}
	readyCh := make(chan result, 1)
	go func() {
		at, err := p.WaitReady(ctx, 5*time.Millisecond)
		readyCh <- result{at, err}
	}()
	apiAt, err := restartAPI(ctx, pl)
	if err != nil {
		return err
	}
	ready := <-readyCh
	if ready.err != nil {
		return ready.err
	}
	ser.add(ready.at.Sub(apiAt))
	snap, _, err := p.WaitLine(ctx, 0, harness.Contains("Startup snapshot taken"))
	if err != nil {
		return err
	}
	snapLog.add(snap.At().Sub(apiAt))
	return nil
}

// logVolume starts an operator with the API down for outage and counts its
// retry lines and all its lines.
func (b *bench) logVolume(ctx context.Context, pl *plane, outage time.Duration) (retries, all int, err error) {
	if err := pl.cp.StopAPIServer(); err != nil {
		return 0, 0, fmt.Errorf("stop the API server: %w", err)
	}
	defer func() { _, _ = restartAPI(ctx, pl) }()
	p, err := b.operator(pl, "log-volume")
	if err != nil {
		return 0, 0, err
	}
	defer p.Stop(10 * time.Second)
	if _, _, err := p.WaitLine(ctx, 0, harness.Contains("connection refused")); err != nil {
		return 0, 0, err
	}
	if err := harness.Wait(ctx, outage); err != nil {
		return 0, 0, err
	}
	return p.Log.CountWhere(harness.Message("FeatureGate not read")), p.Log.Len(), nil
}

func (b *bench) measureOutage(ctx context.Context) *section {
	sec := &section{Name: "outage", Title: "Change during an outage → exit"}
	sec.Method = []string{
		"One control plane plus a second kube-apiserver on the same etcd. Every run starts a fresh operator against the first API server and waits until it runs " +
			"(FeatureGate workers started, applier ran once, then 1 s), stops the first API server, flips the gate through the second one, and starts the first again. " +
			"Measured from the harness's first successful read through the first API server (one started every 10 ms) to the operator's exit, and to its `requesting shutdown` line. " +
			"The outage lasts as long as a kube-apiserver stop (test/framework/controlplane sets `--shutdown-watch-termination-grace-period=1s`, so that the operator's open watch does not hold it up) and restart take here (see the outage row). " +
			"The operator learns of the change either from its informer, whose watch reconnects on client-go's reflector backoff, or from the guard's monitor, which reads live (a list by name) and watches from that read (the `detectedBy` field of the log line says which).",
	}
	exit := &series{Label: "API back → process exited", Short: "outage: API back -> exit", Target: time.Second}
	detect := &series{Label: "API back → `requesting shutdown` logged", Short: "outage: API back -> detected", Target: 100 * time.Millisecond}
	outage := &series{Label: "outage length (API server stopped → answering again)", Short: "outage: length"}
	sec.Series = []*series{exit, detect, outage}
	pl, err := b.featureGatePlane(ctx, "outage")
	if err != nil {
		sec.Err = err
		return sec
	}
	defer pl.stop()
	secondCfg, err := pl.cp.SecondAPIServer()
	if err != nil {
		sec.Err = err
		return sec
	}
	second, err := client.New(secondCfg, client.Options{Scheme: scheme})
	if err != nil {
		sec.Err = err
		return sec
	}
	var e errs
	by := map[string]int{}
	for i := 0; i < b.frac(3, 1) && ctx.Err() == nil; i++ {
		e.add(i, b.outageRun(ctx, pl, second, i, exit, detect, outage, by))
	}
	sec.Err = e.err()
	sec.notePathsAndCheck(by, exit, exit.Target)
	// The monitor reads again 50 ms after a read that reached no server.
	if s := summarize(detect.Values); s.N > 0 {
		sec.Checks = append(sec.Checks, check{"API back → change detected ≤ 100 ms (p99)", "p99 " + fmtDur(s.P99) + ", p50 " + fmtDur(s.P50), s.P99 <= 100*time.Millisecond})
	}
	return sec
}

func (b *bench) outageRun(ctx context.Context, pl *plane, second client.Client, i int, exit, detect, outage *series, by map[string]int) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	p, err := b.runningOperator(ctx, pl, fmt.Sprintf("outage-%d", i))
	if err != nil {
		return err
	}
	defer p.Stop(10 * time.Second)
	stopped := time.Now()
	if err := pl.cp.StopAPIServer(); err != nil {
		return fmt.Errorf("stop the API server: %w", err)
	}
	if _, err := flipGate(ctx, second); err != nil {
		_, _ = restartAPI(ctx, pl)
		return fmt.Errorf("through the second API server: %w", err)
	}
	apiAt, err := restartAPI(ctx, pl)
	if err != nil {
		return err
	}
	outage.add(apiAt.Sub(stopped))
	return exitAndDetection(ctx, p, apiAt, exit, detect, by)
}

// runningOperator starts an operator and returns once it runs: its
// FeatureGate workers started, the applier ran once, and a second more (a
// watch younger than a second counts as "very short" to client-go's
// reflector; let it be an ordinary one when the API goes away).
func (b *bench) runningOperator(ctx context.Context, pl *plane, name string, args ...string) (*harness.Process, error) {
	p, err := b.operator(pl, name, args...)
	if err != nil {
		return nil, err
	}
	for _, line := range []string{`"Starting workers"`, `"Manifests applied"`} {
		if _, _, err := p.WaitLine(ctx, 0, harness.Contains(line)); err != nil {
			p.Stop(10 * time.Second)
			return nil, err
		}
	}
	if err := harness.Wait(ctx, time.Second); err != nil {
		p.Stop(10 * time.Second)
		return nil, err
	}
	return p, nil
}

// exitAndDetection waits for p's exit and records, from since, when it
// exited and when it logged the change, and which path saw it.
func exitAndDetection(ctx context.Context, p *harness.Process, since time.Time, exit, detect *series, by map[string]int) error {
	exited, err := p.Wait(ctx)
	if err != nil {
		return err
	}
	if err := p.Err(); err != nil {
		return fmt.Errorf("operator exit: %w", err)
	}
	exit.add(exited.Sub(since))
	if l, ok := p.Log.Find(harness.Contains("requesting shutdown")); ok {
		detect.add(l.At().Sub(since))
		detectedBy := l.Get("detectedBy")
		if detectedBy == "" {
			detectedBy = "?"
		}
		by[detectedBy]++
	}
	return nil
}

// measureAfterOutage is the change that lands just after the API returns:
// the operator's first reads after the outage may precede it, and its
// informer's watch may still be waiting out client-go's backoff.
func (b *bench) measureAfterOutage(ctx context.Context) *section {
	sec := &section{Name: "after-outage", Title: "Change just after the API returns → exit"}
	sec.Method = []string{
		"One control plane. Every run starts a fresh operator and waits until it runs (FeatureGate workers started, applier ran once, then 1 s), stops the API server, " +
			"starts it again, and as soon as the harness's first read through it succeeds (one started every 10 ms) waits a delay that spreads the runs over 0–2 s, " +
			"then flips the gate through that API server. Measured from the flip's update being sent to the operator's exit, and to its `requesting shutdown` line.",
	}
	const target = time.Second
	exit := &series{Label: "change just after the API returns → process exited", Short: "after outage: change -> exit", Target: target}
	detect := &series{Label: "change just after the API returns → `requesting shutdown` logged", Short: "after outage: change -> detected"}
	sec.Series = []*series{exit, detect}
	pl, err := b.featureGatePlane(ctx, "after-outage")
	if err != nil {
		sec.Err = err
		return sec
	}
	defer pl.stop()
	var e errs
	by := map[string]int{}
	runs := 2 * b.frac(3, 1)
	for i := 0; i < runs && ctx.Err() == nil; i++ {
		delay := time.Duration(float64(2*time.Second) * float64(i) / float64(runs))
		e.add(i, b.afterOutageRun(ctx, pl, i, delay, exit, detect, by))
	}
	sec.Err = e.err()
	sec.notePathsAndCheck(by, exit, target)
	return sec
}

func (b *bench) afterOutageRun(ctx context.Context, pl *plane, i int, delay time.Duration, exit, detect *series, by map[string]int) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	p, err := b.runningOperator(ctx, pl, fmt.Sprintf("after-outage-%d", i))
	if err != nil {
		return err
	}
	defer p.Stop(10 * time.Second)
	f, err := prepareFlip(ctx, pl.c)
	if err != nil {
		return err
	}
	if err := pl.cp.StopAPIServer(); err != nil {
		return fmt.Errorf("stop the API server: %w", err)
	}
	if _, err := restartAPI(ctx, pl); err != nil {
		return err
	}
	if err := harness.Wait(ctx, delay); err != nil {
		return err
	}
	sent, _, err := f.timed(ctx, pl.c)
	if err != nil {
		return err
	}
	return exitAndDetection(ctx, p, sent, exit, detect, by)
}

// notePathsAndCheck notes which paths detected the changes and checks the
// exits' p99 against target.
func (sec *section) notePathsAndCheck(by map[string]int, exit *series, target time.Duration) {
	if len(by) > 0 {
		var parts []string
		for k, n := range by {
			parts = append(parts, fmt.Sprintf("%q %d", k, n))
		}
		sort.Strings(parts)
		sec.Notes = append(sec.Notes, "Detected by (the log line's `detectedBy`): "+strings.Join(parts, ", ")+".")
	}
	if s := summarize(exit.Values); s.N > 0 {
		sec.Checks = append(sec.Checks, check{"≤ " + fmtDur(target) + " (p99)", "p99 " + fmtDur(s.P99) + ", p50 " + fmtDur(s.P50), s.P99 <= target})
	}
}
