// Package featuregatetest is what an operator that adopts the FeatureGate
// guard tests with. In unit tests a reconciler that depends on
// featuregate.Gates is given a *Gates, which answers what the test says, and
// the test simulates what the guard would see (the view going stale during
// an outage, or the FeatureGate changing). A test of the whole manager gives
// the guard a File (Options.File) and changes it, with no API server. And
// FeatureGate builds the objects such tests, envtest and fake clients need.
package featuregatetest

import (
	"sync"

	configv1 "github.com/openshift/api/config/v1"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// Version is the release version of the snapshots New builds.
const Version = "0.0.0-featuregatetest"

// Gates is a featuregate.Gates whose snapshot the test gives. Its zero
// value works and has no snapshot yet: Enabled and Current are false, as
// the guard's are before the startup read succeeds, until Take takes one.
type Gates struct {
	mu      sync.Mutex
	snap    featuregate.Snapshot
	taken   bool
	stale   bool
	reason  string
	stopped chan struct{}
}

var _ featuregate.Gates = &Gates{}

// New returns Gates whose snapshot has featureSet ("" is Default) and
// exactly the gates enabled listed, whatever the feature set; no gate is
// disabled, so KnownFeatures lists only these. NewHardcoded keeps disabled
// gates too.
func New(featureSet configv1.FeatureSet, enabled ...configv1.FeatureGateName) *Gates {
	return NewHardcoded(featureSet, enabled, nil)
}

// NewHardcoded returns Gates whose snapshot has featureSet ("" is Default)
// and the gates enabled and disabled listed, written into a
// status.featureGates entry for Version and read the way the guard reads a
// FeatureGate: KnownFeatures reports both lists, as library-go's
// NewHardcodedFeatureGateAccess does. It is current and no stop is
// requested.
func NewHardcoded(featureSet configv1.FeatureSet, enabled, disabled []configv1.FeatureGateName) *Gates {
	g := &Gates{}
	g.Take(featureSet, enabled, disabled)
	return g
}

// Take takes the snapshot NewHardcoded describes, as the guard's startup
// read does once the API answers: a zero Gates goes from "not read yet" to
// read, for tests of what code does before and after. A snapshot is taken
// once; a second Take panics, as the guard never replaces its own.
func (g *Gates) Take(featureSet configv1.FeatureSet, enabled, disabled []configv1.FeatureGateName) {
	fg := FeatureGate(featureSet, StatusGates(Version, gateStrings(enabled), gateStrings(disabled)))
	snap, err := featuregate.Read(fg, Version)
	if err != nil {
		panic(err) // the entry is there: Read cannot fail
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.taken {
		panic("featuregatetest: Take on Gates that has a snapshot; the guard takes one per process")
	}
	g.snap, g.taken = snap, true
}

func gateStrings(gates []configv1.FeatureGateName) []string {
	out := make([]string, 0, len(gates))
	for _, g := range gates {
		out = append(out, string(g))
	}
	return out
}

// Enabled reports whether gate is enabled in the snapshot; false before one
// is taken.
func (g *Gates) Enabled(gate configv1.FeatureGateName) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.taken && g.snap.Enabled(gate)
}

// Current is true unless there is no snapshot, SetStale(true) was called, or
// a change was simulated.
func (g *Gates) Current() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.taken && !g.stale && g.reason == ""
}

// Snapshot returns the snapshot once one is taken.
func (g *Gates) Snapshot() (featuregate.Snapshot, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.snap, g.taken
}

// StopRequested is closed by Change.
func (g *Gates) StopRequested() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.stopChan()
}

// stopChan is made on first use, so that the zero value works.
func (g *Gates) stopChan() chan struct{} {
	if g.stopped == nil {
		g.stopped = make(chan struct{})
	}
	return g.stopped
}

// SetStale makes Current false (true) or lets it answer again (false), as
// the guard's does while it cannot vouch for its view, during an API outage.
func (g *Gates) SetStale(stale bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stale = stale
}

// Change simulates the FeatureGate changing: Current becomes false for good
// and StopRequested is closed, as the guard does before the manager stops.
func (g *Gates) Change(reason string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.reason != "" {
		return
	}
	if reason == "" {
		reason = "changed"
	}
	g.reason = reason
	close(g.stopChan())
}

// StopReason returns what Change was given, and whether it was called.
func (g *Gates) StopReason() (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reason, g.reason != ""
}
