package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// leaseName is the operator's default leader election Lease
// (--leader-election-id).
const leaseName = "featuregate-operator.featuregate-operator.io"

// acquiredLease is what client-go's leader election logs on becoming leader.
const acquiredLease = "uccessfully acquired lease"

// leaseChange is a holder the harness saw on the Lease, and when.
type leaseChange struct {
	at     time.Time
	holder string
}

// pollLease records every change of the Lease's holder until stop is called.
func pollLease(ctx context.Context, pl *plane) (changes func() []leaseChange, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var seen []leaseChange
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		last := "\x00"
		for {
			if l, err := lease(ctx, pl.c, leaseName); err == nil && l != nil {
				h := ""
				if l.Spec.HolderIdentity != nil {
					h = *l.Spec.HolderIdentity
				}
				if h != last {
					mu.Lock()
					seen = append(seen, leaseChange{time.Now(), h})
					mu.Unlock()
					last = h
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() []leaseChange {
			mu.Lock()
			defer mu.Unlock()
			return append([]leaseChange(nil), seen...)
		}, func() {
			cancel()
			<-done
		}
}

func (b *bench) measureHandover(ctx context.Context) *section {
	sec := &section{Name: "handover", Title: "Restart handover (2 replicas, leader election)"}
	sec.Method = []string{
		"Two operator processes with `--leader-elect --leader-election-namespace=default` and controller-runtime's timings (`--leader-elect-lease-duration=15s --leader-elect-renew-deadline=10s --leader-elect-retry-period=2s`; the operator's defaults are OpenShift's 137 s/107 s/26 s) on one control plane. " +
			"A run flips the gate; both replicas see the change and exit (the Stopper runs on every replica), and the harness starts a replacement the moment each one exits, as a kubelet would. " +
			"Measured from the update's API response to the moment a replacement holds the Lease (the harness polls `holderIdentity` every 10 ms) and that replacement's `/readyz` answers 200 " +
			"(its `Startup snapshot taken` line is checked to show the new gate state). The replacements are the pair of the next run.",
		"With release: the operator as built (`LeaderElectionReleaseOnCancel: true`, the lease is released on the way out). " +
			"Without: emulated by SIGKILLing the old leader the moment the harness reads its `requesting shutdown` line, so that the Lease stays held until it expires, " +
			"as it would for a process that exits without releasing; a run where the harness saw the Lease released before the kill landed is discarded.",
	}
	with := &series{Label: "with release: change → replacement leads and is ready", Short: "handover: with release", Target: 2 * time.Second}
	without := &series{Label: "without release (old leader killed): change → replacement leads and is ready", Short: "handover: without release"}
	withLease := &series{Label: "with release: change → Lease held by a replacement", Short: "handover: lease (release)"}
	withReady := &series{Label: "with release: change → replacement /readyz 200", Short: "handover: ready (release)"}
	leaderExit := &series{Label: "leader: stop requested → process exited (drain + lease release)", Short: "stop -> exit (leader)", Target: time.Second}
	sec.Series = []*series{with, withLease, withReady, without, leaderExit}

	pl, err := b.featureGatePlane(ctx, "handover")
	if err != nil {
		sec.Err = err
		return sec
	}
	defer pl.stop()
	var pair [2]*harness.Process
	for j := range pair {
		if pair[j], err = b.replica(pl, fmt.Sprintf("handover-init-%d", j)); err != nil {
			sec.Err = err
			return sec
		}
	}
	defer func() {
		for _, p := range pair {
			if p != nil {
				p.Stop(10 * time.Second)
			}
		}
	}()
	var e errs
	discarded := 0
	run := 0
	for _, v := range []struct {
		kill bool
		runs int
	}{{false, b.frac(3, 1)}, {true, b.frac(6, 1)}} {
		for i := 0; i < v.runs && ctx.Err() == nil; i++ {
			res, next, err := b.handoverRun(ctx, pl, pair, run, v.kill)
			run++
			for j := range pair {
				if next[j] != nil {
					pair[j] = next[j]
				}
			}
			if err != nil {
				e.add(run, err)
				// Start over from a fresh pair.
				for j := range pair {
					pair[j].Stop(10 * time.Second)
					if pair[j], err = b.replica(pl, fmt.Sprintf("handover-restart-%d-%d", run, j)); err != nil {
						sec.Err = err
						return sec
					}
				}
				continue
			}
			switch {
			case res.discarded:
				discarded++
			case v.kill:
				without.add(res.total)
			default:
				with.add(res.total)
				withLease.add(res.lease)
				withReady.add(res.ready)
				leaderExit.add(res.leaderStopExit)
			}
		}
	}
	sec.Err = e.err()
	if discarded > 0 {
		sec.Notes = append(sec.Notes, fmt.Sprintf("%d run(s) without release discarded: the Lease was released before the kill landed.", discarded))
	}
	w, wo := summarize(with.Values), summarize(without.Values)
	if w.N > 0 {
		sec.Checks = append(sec.Checks, check{"≤ 2 s with release (p99)", "p99 " + fmtDur(w.P99) + ", p50 " + fmtDur(w.P50), w.P99 <= 2*time.Second})
		if wo.N > 0 {
			sec.Notes = append(sec.Notes, fmt.Sprintf("Release on cancel saves %s at the median (%s without, %s with: %s).", fmtDur(wo.P50-w.P50), fmtDur(wo.P50), fmtDur(w.P50), fmtRatio(ratio(wo.P50, w.P50))))
		}
	}
	if s := summarize(leaderExit.Values); s.N > 0 {
		sec.Checks = append(sec.Checks, check{"stop requested → process exited ≤ 1 s (p99), leader releasing its lease", "p99 " + fmtDur(s.P99), s.P99 <= time.Second})
	}
	return sec
}

func (b *bench) replica(pl *plane, name string) (*harness.Process, error) {
	return b.operator(pl, name, "--leader-elect", "--leader-election-namespace=default",
		"--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s", "--leader-elect-retry-period=2s")
}

type handoverResult struct {
	total, lease, ready, leaderStopExit time.Duration
	discarded                           bool
}

// handoverRun changes the FeatureGate under a running pair and times the
// handover to their replacements, which it returns as the next pair.
func (b *bench) handoverRun(ctx context.Context, pl *plane, pair [2]*harness.Process, run int, kill bool) (handoverResult, [2]*harness.Process, error) {
	var res handoverResult
	var next [2]*harness.Process
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	// Steady state: both ready, one leads and has applied.
	leader := -1
	for _, p := range pair {
		if _, err := p.WaitReady(ctx, 20*time.Millisecond); err != nil {
			return res, next, err
		}
	}
	for leader < 0 {
		for j, p := range pair {
			if _, ok := p.Log.Find(harness.Contains(acquiredLease)); ok {
				leader = j
			}
		}
		if leader < 0 {
			select {
			case <-ctx.Done():
				return res, next, fmt.Errorf("no replica became leader: %w", ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if _, _, err := pair[leader].WaitLine(ctx, 0, harness.Contains(`"Manifests applied"`)); err != nil {
		return res, next, err
	}
	old, err := lease(ctx, pl.c, leaseName)
	if err != nil || old == nil || old.Spec.HolderIdentity == nil || *old.Spec.HolderIdentity == "" {
		return res, next, fmt.Errorf("no lease holder before the change (%w)", err)
	}
	oldHolder := *old.Spec.HolderIdentity
	var killedAt time.Time
	var killMu sync.Mutex
	if kill {
		lp := pair[leader]
		lp.Log.OnFirst(harness.Contains("requesting shutdown"), func(harness.Line) {
			lp.Kill()
			killMu.Lock()
			killedAt = time.Now()
			killMu.Unlock()
		})
	}
	changes, stopPoll := pollLease(ctx, pl)
	defer stopPoll()

	// The kubelet: a replacement the moment a process exits.
	type started struct {
		j   int
		p   *harness.Process
		err error
	}
	startedCh := make(chan started, 2)
	for j, p := range pair {
		go func() {
			if _, err := p.Wait(ctx); err != nil {
				startedCh <- started{j, nil, err}
				return
			}
			np, err := b.replica(pl, fmt.Sprintf("handover-%d-%d", run, j))
			startedCh <- started{j, np, err}
		}()
	}

	f, err := prepareFlip(ctx, pl.c)
	if err != nil {
		return res, next, err
	}
	t0, err := f.do(ctx, pl.c)
	if err != nil {
		return res, next, err
	}
	for range pair {
		select {
		case s := <-startedCh:
			if s.err != nil {
				return res, next, s.err
			}
			next[s.j] = s.p
		case <-ctx.Done():
			return res, next, fmt.Errorf("replicas did not exit after the change: %w", ctx.Err())
		}
	}
	// The new leader: the replacement that logs the acquisition first.
	newLeader := -1
	for newLeader < 0 {
		for j, p := range next {
			if _, ok := p.Log.Find(harness.Contains(acquiredLease)); ok {
				newLeader = j
				break
			}
		}
		if newLeader < 0 {
			select {
			case <-ctx.Done():
				return res, next, fmt.Errorf("no replacement became leader: %w", ctx.Err())
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	nl := next[newLeader]
	readyAt, err := nl.WaitReady(ctx, 5*time.Millisecond)
	if err != nil {
		return res, next, err
	}
	snap, _, err := nl.WaitLine(ctx, 0, harness.Contains("Startup snapshot taken"))
	if err != nil {
		return res, next, err
	}
	want := "disabled [" + benchGate + "]"
	if f.enabled {
		want = "enabled [" + benchGate + "]"
	}
	if !strings.Contains(snap.Raw, want) { // the "snapshot" key
		return res, next, fmt.Errorf("replacement snapshot %q does not show %s", snap.Raw, want)
	}
	// When the Lease first named someone new: poll until it does.
	var leaseAt time.Time
	released := false
	for leaseAt.IsZero() {
		for _, c := range changes() {
			if c.at.Before(t0) {
				continue
			}
			if c.holder == "" {
				released = true
			} else if c.holder != oldHolder {
				leaseAt = c.at
				break
			}
		}
		if leaseAt.IsZero() {
			select {
			case <-ctx.Done():
				return res, next, fmt.Errorf("lease never moved from %s: %w", oldHolder, ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	for j, p := range pair {
		if j == leader {
			continue
		}
		if l, ok := p.Log.Find(harness.Contains(acquiredLease)); ok && l.Recv.After(t0) {
			return res, next, fmt.Errorf("the old standby took the lease on its way out")
		}
	}
	res.lease = leaseAt.Sub(t0)
	res.ready = readyAt.Sub(t0)
	res.total = max(res.lease, res.ready)
	if kill {
		killMu.Lock()
		k := killedAt
		killMu.Unlock()
		res.discarded = released || k.IsZero()
	} else if l, ok := pair[leader].Log.Find(harness.Contains("requesting shutdown")); ok {
		res.leaderStopExit = pair[leader].ExitedAt().Sub(l.At())
	}
	return res, next, nil
}
