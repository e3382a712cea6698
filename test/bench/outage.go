package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/internal/testharness"
)

// apiPoll is how often the harness starts a read to see whether the API
// server answers again; it bounds how late "API available" is seen.
const apiPoll = 10 * time.Millisecond

// restartAPI starts the first API server again and returns the time the
// harness's first read through it succeeded.
func restartAPI(ctx context.Context, pl *plane) (time.Time, error) {
	started := make(chan error, 1)
	go func() { started <- pl.cp.StartAPIServer() }()
	apiAt, err := pollAPI(ctx, pl.c, apiPoll)
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
		"One control plane; every run stops the API server (etcd stays), starts a fresh operator, waits until its FeatureGate reads have backed off to the cap " +
			"(a `retryIn` of the cap in its log), waits a delay that spreads the runs evenly over one retry interval, then starts the API server again on the same port. " +
			"\"API available\": the first successful GET of the FeatureGate through it by the harness, which starts one every 10 ms from before the restart without waiting for those in flight. " +
			"Ready: the first `/readyz` 200, polled every 5 ms. The read is retried with jittered exponential backoff from 100 ms up to the cap, " +
			"so the expected wait is up to one cap after the API returns; the default cap (`--initial-fetch-backoff-cap`) is 2 s, and a run with a 1 s cap shows the knob.",
	}
	variants := []struct {
		label, short, capFlag string
		cap                   time.Duration
		runs                  int
	}{
		{"default backoff cap (2s): API available → /readyz 200", "ready: cap 2s (default)", "", 2 * time.Second, b.frac(3, 1)},
		{"`--initial-fetch-backoff-cap=1s`: API available → /readyz 200", "ready: cap 1s", "--initial-fetch-backoff-cap=1s", time.Second, b.frac(3, 1)},
	}
	snapLog := &series{Label: "default cap: API available → `startup feature set` logged", NoChart: true}
	pl, err := b.featureGatePlane(ctx, "ready")
	if err != nil {
		sec.Err = err
		return sec
	}
	defer pl.stop()
	var e errs
	stalled := make([][]time.Duration, len(variants))
	for vi, v := range variants {
		ser := &series{Label: v.label, Short: v.short, Target: time.Second}
		sec.Series = append(sec.Series, ser)
		if vi == 0 {
			sec.Series = append(sec.Series, snapLog)
		}
		for i := 0; i < v.runs && ctx.Err() == nil; i++ {
			var snap *series
			if vi == 0 {
				snap = snapLog
			}
			// Spread the moment the API returns evenly over one retry
			// interval: the API server's own start time is nearly constant,
			// and would otherwise hit the same phase every run.
			phase := time.Duration(float64(v.cap) * (float64(i) + 0.5) / float64(v.runs))
			st, err := b.readyRun(ctx, pl, fmt.Sprintf("ready-%d-%d", vi, i), v.capFlag, v.cap, phase, ser, snap)
			e.add(i, err)
			if st > 0 {
				stalled[vi] = append(stalled[vi], st)
			}
		}
		slow := 0
		for _, d := range ser.Values {
			if d > v.cap+250*time.Millisecond {
				slow++
			}
		}
		if slow > 0 {
			sec.Notes = append(sec.Notes, fmt.Sprintf("%s: %d of %d runs took longer than the cap; in %d of them the successful read had been sent before the API server answered the harness, and took %s (median) "+
				"to be answered: it reached kube-apiserver while that was still starting up, and the harness's later reads got through long before. "+
				"The operator's per-attempt timeout (up to 10s) is longer than such a stall, so it waits the stalled request out.", v.short, slow, len(ser.Values), len(stalled[vi]), fmtDur(summarize(stalled[vi]).P50)))
		}
		s := summarize(ser.Values)
		if s.N > 0 {
			sec.Checks = append(sec.Checks, check{fmt.Sprintf("≤ 1 s (p99), %s", v.short), "p99 " + fmtDur(s.P99) + ", p50 " + fmtDur(s.P50), s.P99 <= time.Second})
		}
	}
	sec.Err = e.err()
	return sec
}

// readyRun times one start with the API down; stalled is how long the read
// that succeeded took when it had been sent before the API answered the
// harness and took over a second, else zero.
func (b *bench) readyRun(ctx context.Context, pl *plane, name, capFlag string, backoffCap, phase time.Duration, ser, snapLog *series) (stalled time.Duration, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := pl.cp.StopAPIServer(); err != nil {
		return 0, fmt.Errorf("stop the API server: %w", err)
	}
	var args []string
	if capFlag != "" {
		args = append(args, capFlag)
	}
	p, err := b.operator(pl, name, args...)
	if err != nil {
		_, _ = restartAPI(ctx, pl)
		return 0, err
	}
	defer p.Stop(10 * time.Second)
	if _, _, err := p.WaitLine(ctx, 0, testharness.Contains(fmt.Sprintf(`"retryIn":"%s"`, backoffCap))); err != nil {
		_, _ = restartAPI(ctx, pl)
		return 0, err
	}
	if err := sleep(ctx, phase); err != nil {
		_, _ = restartAPI(ctx, pl)
		return 0, err
	}
	apiAt, err := restartAPI(ctx, pl)
	if err != nil {
		return 0, err
	}
	readyAt, err := p.WaitReady(ctx, 5*time.Millisecond)
	if err != nil {
		return 0, err
	}
	ser.add(readyAt.Sub(apiAt))
	snap, i, err := p.WaitLine(ctx, 0, testharness.Contains("startup feature set"))
	if err != nil {
		return 0, err
	}
	if snapLog != nil {
		snapLog.add(snap.At().Sub(apiAt))
	}
	if sent, ok := lastAttemptStart(p, i); ok && sent.Before(apiAt) && snap.At().Sub(sent) > time.Second {
		stalled = snap.At().Sub(sent)
	}
	return stalled, nil
}

// lastAttemptStart is when the read that ended at line index end began:
// the last failure before it plus the logged retryIn.
func lastAttemptStart(p *testharness.Process, end int) (time.Time, bool) {
	lines := p.Log.Lines()
	for i := min(end, len(lines)) - 1; i >= 0; i-- {
		l := lines[i]
		if !strings.Contains(l.Raw, "Error getting FeatureGate") {
			continue
		}
		d, err := time.ParseDuration(l.Get("retryIn"))
		if err != nil {
			return time.Time{}, false
		}
		return l.At().Add(d), true
	}
	return time.Time{}, false
}

func (b *bench) measureOutage(ctx context.Context) *section {
	sec := &section{Name: "outage", Title: "Change during an outage → exit"}
	sec.Method = []string{
		"One control plane plus a second kube-apiserver on the same etcd. Every run starts a fresh operator against the first API server and waits until it runs " +
			"(FeatureGate workers started, applier ran once, then 1 s), stops the first API server, flips the gate through the second one, and starts the first again. " +
			"Measured from the harness's first successful read through the first API server (one started every 10 ms) to the operator's exit, and to its `requesting shutdown` line. " +
			"The outage lasts as long as a kube-apiserver stop (internal/controlplane sets `--shutdown-watch-termination-grace-period=1s`, so that the operator's open watch does not hold it up) and restart take here (see the outage row). " +
			"The operator learns of the change either from its informer, whose watch reconnects on client-go's reflector backoff, or from its verifier's live reads (the `detectedBy` field of the log line says which).",
	}
	exit := &series{Label: "API back → process exited", Short: "outage: API back -> exit", Target: 2 * time.Second}
	detect := &series{Label: "API back → `requesting shutdown` logged", Short: "outage: API back -> detected"}
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
	if len(by) > 0 {
		var parts []string
		for k, n := range by {
			parts = append(parts, fmt.Sprintf("%q %d", k, n))
		}
		sort.Strings(parts)
		sec.Notes = append(sec.Notes, "Detected by (the log line's `detectedBy`): "+strings.Join(parts, ", ")+".")
	}
	if s := summarize(exit.Values); s.N > 0 {
		sec.Checks = append(sec.Checks, check{"≤ 2 s (p99)", "p99 " + fmtDur(s.P99) + ", p50 " + fmtDur(s.P50), s.P99 <= 2*time.Second})
	}
	return sec
}

func (b *bench) outageRun(ctx context.Context, pl *plane, second client.Client, i int, exit, detect, outage *series, by map[string]int) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	p, err := b.operator(pl, fmt.Sprintf("outage-%d", i))
	if err != nil {
		return err
	}
	defer p.Stop(10 * time.Second)
	for _, line := range []string{`"Starting workers"`, `"applied manifests"`} {
		if _, _, err := p.WaitLine(ctx, 0, testharness.Contains(line)); err != nil {
			return err
		}
	}
	// A watch younger than a second counts as "very short" to client-go's
	// reflector; let it be an ordinary one when the API goes away.
	if err := sleep(ctx, time.Second); err != nil {
		return err
	}
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
	exited, err := p.Wait(ctx)
	if err != nil {
		return err
	}
	if err := p.Err(); err != nil {
		return fmt.Errorf("operator exit: %w", err)
	}
	exit.add(exited.Sub(apiAt))
	outage.add(apiAt.Sub(stopped))
	if l, ok := p.Log.Find(testharness.Contains("requesting shutdown")); ok {
		detect.add(l.At().Sub(apiAt))
		detectedBy := l.Get("detectedBy")
		if detectedBy == "" {
			detectedBy = "?"
		}
		by[detectedBy]++
	}
	return nil
}
