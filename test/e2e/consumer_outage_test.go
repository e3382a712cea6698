package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// outageRound is what one round of TestConsumerChangeJustAfterOutage saw.
type outageRound struct {
	delay time.Duration
	// patched: the gate was flipped, and the next round starts from there.
	patched bool
	// detected is the change line's timestamp minus the time the patch call
	// returned (negative when the watch event beat the patch's response);
	// exited the same for the exit. Both are set once measured is.
	detected, exited time.Duration
	detectedBy       string
	measured         bool
	// stopTook and startTook are the API server's own stop and start.
	stopTook, startTook time.Duration
	problems            []string
}

func (r *outageRound) fail(format string, args ...any) {
	r.problems = append(r.problems, fmt.Sprintf(format, args...))
}

// The key acceptance test of the guard: a change made just after an API
// outage ends. Each round starts a consumer that acts every 50 ms, stops its
// API server for about a second, starts it, and once it answers waits a
// delay (0 to 1.9 s across the rounds, so that the change lands at every
// stage of the guard's recovery: before its first read after the outage,
// while its watch is set up, after) and flips the consumed gate. The process
// must exit 0 within 2 s of the patch, and never act on the old state once
// the change was delivered (staleAfter), nor while its API server was down.
func TestConsumerChangeJustAfterOutage(t *testing.T) {
	lane(t)
	const rounds = 20
	bin := buildConsumer(t)
	enabled := true
	cp, c := startConsumerCluster(t, enabled)
	kc := harness.Kubeconfig(t, cp.Config)
	// Asks whether the API server answers, each attempt short, so that the
	// first answer is seen at once.
	poll, err := harness.NewClient(cp.Config, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}

	// About 7 s a round on two shared cores, most of it the API server's
	// own restart; the setup above is not counted.
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	started := time.Now()
	var detected, exited []time.Duration
	by := map[string]int{}
	ran, failed := 0, 0
	for i := range rounds {
		if ctx.Err() != nil {
			t.Errorf("only %d of %d rounds ran within the test's time bound", ran, rounds)
			break
		}
		r := &outageRound{delay: time.Duration(i) * 100 * time.Millisecond}
		changeJustAfterOutage(ctx, t, cp, poll, c, bin, kc, i, enabled, r)
		ran++
		summary := fmt.Sprintf("round %2d: delay %4dms, %s %-8s -> %-8s", i, r.delay.Milliseconds(), consumerGate, gateState(enabled), gateState(!enabled))
		if r.measured {
			detected, exited = append(detected, r.detected), append(exited, r.exited)
			by[r.detectedBy]++
			summary += fmt.Sprintf(" detected %+5dms (detectedBy %s), exit %+5dms", r.detected.Milliseconds(), r.detectedBy, r.exited.Milliseconds())
		}
		summary += fmt.Sprintf("  [API stop %.1fs, start %.1fs]", r.stopTook.Seconds(), r.startTook.Seconds())
		if len(r.problems) > 0 {
			failed++
			summary += "  FAILED"
			for _, p := range r.problems {
				t.Errorf("round %d: %s", i, p)
			}
		}
		t.Log(summary)
		if r.patched {
			enabled = !enabled
		}
	}
	t.Logf("%d rounds (%d failed) in %.0fs: detection p50 %dms p99 %dms, exit p50 %dms p99 %dms, detectedBy %v", ran, failed, time.Since(started).Seconds(),
		percentile(detected, 50).Milliseconds(), percentile(detected, 99).Milliseconds(),
		percentile(exited, 50).Milliseconds(), percentile(exited, 99).Milliseconds(), by)
}

// changeJustAfterOutage is one round: the consumer's snapshot has the gate
// enabled (or not), and the change flips it.
func changeJustAfterOutage(ctx context.Context, t *testing.T, cp *controlplane.ControlPlane, poll, c client.Client,
	bin, kc string, i int, enabled bool, r *outageRound) {
	const outage = time.Second
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	p, err := harness.Start(consumerOptions(t, fmt.Sprintf("consumer-%02d", i), bin, kc, "--resync=50ms"))
	if err != nil {
		r.fail("%v", err)
		return
	}
	// Not StartT: twenty processes' logs on a failure would bury the one
	// that matters; a failed round logs its own.
	defer func() {
		p.Kill()
		<-p.Done()
		if len(r.problems) > 0 {
			logTail(t, p, 80)
		}
	}()
	if _, err := p.WaitReady(ctx, 50*time.Millisecond); err != nil {
		r.fail("%v", err)
		return
	}
	if _, _, err := p.WaitLine(ctx, 0, actedWith(enabled)); err != nil {
		r.fail("%v", err)
		return
	}

	stopping := time.Now()
	if err := cp.StopAPIServer(); err != nil {
		r.fail("stop the API server: %v", err)
		return
	}
	stopped := time.Now()
	r.stopTook = stopped.Sub(stopping)
	if harness.Wait(ctx, outage) != nil {
		r.fail("%v", ctx.Err())
		return
	}
	restart := time.Now()
	if err := cp.StartAPIServer(); err != nil {
		r.fail("start the API server: %v", err)
		return
	}
	r.startTook = time.Since(restart)
	if err := untilAnswers(ctx, poll); err != nil {
		r.fail("%v", err)
		return
	}
	// Once the API server's process is gone, its connections are: the
	// guard cannot vouch for anything until it is started again.
	if acts := actsBetween(p, stopped.Add(watchDelivery), restart); acts > 0 {
		r.fail("acted %d times while its API server was down", acts)
	}
	if harness.Wait(ctx, r.delay) != nil {
		r.fail("%v", ctx.Err())
		return
	}
	if !p.Running() {
		r.fail("exited (code %d) before the change", p.ExitCode())
		return
	}

	if err := setConsumerGate(ctx, c, !enabled); err != nil {
		r.fail("flip %s: %v", consumerGate, err)
		return
	}
	patched := time.Now()
	r.patched = true
	// Waits past detectWithin, to tell late from never.
	waitCtx, cancelWait := context.WithDeadline(ctx, patched.Add(5*detectWithin))
	defer cancelWait()
	exitedAt, err := p.Wait(waitCtx)
	if err != nil {
		r.fail("no exit after the change: %v", err)
		return
	}
	r.exited = exitedAt.Sub(patched)
	if code := p.ExitCode(); code != 0 {
		r.fail("exit code %d after the change", code)
	}
	diff := fmt.Sprintf("gate %s %s -> %s in status for version %s", consumerGate, gateState(enabled), gateState(!enabled), consumerVersion)
	line, ok := p.Log.Find(harness.All(changedBy(diff), harness.HasKey("detectedBy")))
	if !ok {
		r.fail("exited without logging the change %q", diff)
		return
	}
	r.detected, r.detectedBy, r.measured = line.At().Sub(patched), line.Get("detectedBy"), true
	if r.detected > detectWithin || r.exited > detectWithin {
		r.fail("change detected %s and exit %s after the patch; want both within %s", r.detected, r.exited, detectWithin)
	}
	// The change is readable from the moment the patch call returned; only
	// the delivery of the watch event to the guard may lag (staleAfter).
	if stale := staleActs(p, enabled, staleAfter(patched, line)); len(stale) > 0 {
		r.fail("acted on the old state (%s=%s) %d times after the change was readable (patch returned %s), first:\n%s",
			consumerGate, gateState(enabled), len(stale), patched.Format(time.RFC3339Nano), stale[0])
	}
}

// untilAnswers polls until the API server answers a GET of the FeatureGate.
func untilAnswers(ctx context.Context, c client.Client) error {
	for {
		if err := c.Get(ctx, client.ObjectKey{Name: "cluster"}, &configv1.FeatureGate{}); err == nil {
			return nil
		}
		if harness.Wait(ctx, 10*time.Millisecond) != nil {
			return fmt.Errorf("API server not answering: %w", ctx.Err())
		}
	}
}

// actsBetween counts the "Acted" lines logged in (from, to).
func actsBetween(p *harness.Process, from, to time.Time) int {
	n := 0
	for _, l := range p.Log.Lines() {
		if l.Msg == msgActed && l.At().After(from) && l.At().Before(to) {
			n++
		}
	}
	return n
}

func gateState(enabled bool) string {
	if enabled {
		return "enabled"
	}
	return "disabled"
}

// percentile is the nearest-rank percentile of ds; 0 when empty.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	rank := (p*len(s) + 99) / 100
	return s[max(rank, 1)-1]
}

// logTail logs the last n lines of p.
func logTail(t *testing.T, p *harness.Process, n int) {
	lines := p.Log.Lines()
	raw := make([]string, 0, n)
	for _, l := range lines[max(len(lines)-n, 0):] {
		raw = append(raw, l.Raw)
	}
	t.Logf("%s: last %d of %d log lines (exit code %d):\n%s", p.Name, len(raw), len(lines), p.ExitCode(), strings.Join(raw, "\n"))
}
