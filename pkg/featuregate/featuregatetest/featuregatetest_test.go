package featuregatetest

import (
	"slices"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
)

func TestGates(t *testing.T) {
	g := New("", "A")
	snap, ok := g.Snapshot()
	if !ok || snap.FeatureSetName() != "Default" || snap.Version() != Version {
		t.Fatalf("Snapshot() = %v, %v", snap, ok)
	}
	if !g.Enabled("A") || g.Enabled("B") {
		t.Errorf("Enabled: A %v, B %v; want true, false", g.Enabled("A"), g.Enabled("B"))
	}
	if !g.Current() {
		t.Error("a new Gates is not current")
	}
	g.Change("first")
	g.Change("second")
	if reason, ok := g.StopReason(); !ok || reason != "first" {
		t.Errorf("StopReason() = %q, %v; want the first reason", reason, ok)
	}
	if g.Current() {
		t.Error("current after a change")
	}
}

// The zero value is a double that works: no snapshot yet, and a change
// still closes StopRequested (it did nothing before, and StopRequested was
// nil, a channel that never closes).
func TestZeroGatesWorks(t *testing.T) {
	var zero Gates
	if zero.Enabled("A") || zero.Current() {
		t.Error("the zero value answers before a snapshot")
	}
	if _, ok := zero.Snapshot(); ok {
		t.Error("the zero value has a snapshot")
	}
	stop := zero.StopRequested()
	if stop == nil {
		t.Fatal("StopRequested of the zero value is nil: a select on it never fires")
	}
	zero.Change("")
	select {
	case <-stop:
	default:
		t.Fatal("Change on the zero value did not close StopRequested")
	}
	if _, ok := zero.StopReason(); !ok {
		t.Error("Change on the zero value left no StopReason")
	}
}

// Disabled gates are kept and reported, as library-go's hardcoded access
// reports them: a test that renders X=false flags from KnownFeatures needs
// them.
func TestNewHardcodedKeepsDisabledGates(t *testing.T) {
	g := NewHardcoded(configv1.TechPreviewNoUpgrade, []configv1.FeatureGateName{"A"}, []configv1.FeatureGateName{"B", "C"})
	snap, _ := g.Snapshot()
	if got, want := snap.KnownFeatures(), []configv1.FeatureGateName{"A", "B", "C"}; !slices.Equal(got, want) {
		t.Errorf("KnownFeatures() = %v, want %v", got, want)
	}
	if !g.Enabled("A") || g.Enabled("B") || g.Enabled("C") {
		t.Error("Enabled does not follow the lists")
	}
}

// A double that starts not read and is then read: code under test requeues
// before and acts after, as with library-go's access before and after
// InitialFeatureGatesObserved.
func TestTakeAfterwards(t *testing.T) {
	var g Gates
	if g.Current() || g.Enabled("A") {
		t.Fatal("answers before Take")
	}
	g.Take(configv1.Default, []configv1.FeatureGateName{"A"}, []configv1.FeatureGateName{"B"})
	if !g.Current() || !g.Enabled("A") || g.Enabled("B") {
		t.Error("after Take: current and A enabled, B disabled expected")
	}
	defer func() {
		if recover() == nil {
			t.Error("a second Take replaced the snapshot")
		}
	}()
	g.Take(configv1.TechPreviewNoUpgrade, nil, nil)
}
