package featuregatetest

import (
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
	var zero Gates
	zero.Change("no snapshot")
	if zero.Enabled(configv1.FeatureGateName("A")) || zero.Current() || zero.StopRequested() != nil {
		t.Error("the zero value answers before a snapshot")
	}
}
