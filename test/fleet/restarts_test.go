package fleet

import (
	"context"
	"testing"
	"time"
)

// TestFleetRestarts runs the fleet through the three changes a cluster
// makes and holds the guard to library-go's rule for the same writes: no
// adopter restarts more often than FeatureGateAccess would, and one none
// of whose consumed gates changed (and that does not watch the feature
// set) does not restart at all.
func TestFleetRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a fleet of processes")
	}
	f := New(t, Config{N: *flagN, Seed: seed(t), Settle: *flagSettle, Consumer: bins.consumer})
	phases := f.restartPhases(t)
	t.Logf("restarts per change:\n%s", restartTable(phases))
	assertTargets(t, phases)
}

// restartPhases starts the fleet and runs changes (a), (b) and (c); it
// fails t at the first error (bounded: every wait has a deadline).
func (f *Fleet) restartPhases(t *testing.T) []Phase {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Minute)
	defer cancel()
	for _, a := range f.Adopters {
		t.Logf("%s: %s, %s", a.Spec.Name, a.Spec.Version, a.Spec.Describe())
	}
	f.Start()
	if err := f.Settle(ctx); err != nil {
		f.fail(t, "start", err)
	}
	var phases []Phase
	for _, change := range []func(context.Context) (Phase, error){f.ToTechPreview, f.Upgrade} {
		ph, err := change(ctx)
		if err != nil {
			f.fail(t, ph.Name, err)
		}
		phases = append(phases, ph)
	}
	if err := f.ToCustom(ctx); err != nil {
		f.fail(t, "to CustomNoUpgrade", err)
	}
	gate := f.flipCandidate()
	ph, err := f.FlipGate(ctx, "CustomNoUpgrade: "+gate+" flipped", gate)
	if err != nil {
		f.fail(t, ph.Name, err)
	}
	return append(phases, ph)
}

// fail ends the test with err and the tail of every adopter that failed
// or is not Ready.
func (f *Fleet) fail(t *testing.T, what string, err error) {
	t.Helper()
	for _, a := range f.Adopters {
		if len(a.Failures()) == 0 && a.Ready() {
			continue
		}
		for _, p := range a.Processes() {
			lines := p.Log.Lines()
			if len(lines) > 40 {
				lines = lines[len(lines)-40:]
			}
			t.Logf("%s pid %d (exited %v, code %d), last %d lines:", a.Spec.Name, p.Pid(), p.Exited(), p.ExitCode(), len(lines))
			for _, l := range lines {
				t.Log(l.Raw)
			}
		}
	}
	t.Fatalf("%s: %v", what, err)
}

// assertTargets checks issue 32's targets on every adopter of every change.
func assertTargets(t *testing.T, phases []Phase) {
	t.Helper()
	for _, ph := range phases {
		for _, r := range ph.Adopters {
			if r.Guard > r.LibraryGo {
				t.Errorf("%s: %s (%s) restarted %d times, library-go's rule %d", ph.Name, r.Spec.Name, r.Spec.Describe(), r.Guard, r.LibraryGo)
			}
			if len(r.ConsumedChanged) == 0 && !r.Spec.WatchFeatureSet && r.Guard != 0 {
				t.Errorf("%s: %s (%s) restarted %d times though none of its gates changed", ph.Name, r.Spec.Name, r.Spec.Describe(), r.Guard)
			}
			// The other side: a guard that detects nothing would pass the
			// two rules above.
			if len(r.ConsumedChanged) > 0 && r.Guard == 0 {
				t.Errorf("%s: %s (%s) kept running though gates it consumes changed: %v", ph.Name, r.Spec.Name, r.Spec.Describe(), r.ConsumedChanged)
			}
		}
	}
}
