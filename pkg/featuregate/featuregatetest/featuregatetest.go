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

// Gates is a featuregate.Gates with a fixed snapshot. Its zero value has no
// snapshot yet: Enabled and Current are false, as the guard's are before
// the startup read succeeds.
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
// exactly the gates enabled listed, whatever the feature set: they are
// written into a status.featureGates entry for Version and read the way
// the guard reads a FeatureGate. It is current and no stop is requested.
func New(featureSet configv1.FeatureSet, enabled ...configv1.FeatureGateName) *Gates {
	gates := make([]string, 0, len(enabled))
	for _, g := range enabled {
		gates = append(gates, string(g))
	}
	fg := FeatureGate(featureSet, StatusGates(Version, gates, nil))
	snap, err := featuregate.Read(fg, Version)
	if err != nil {
		panic(err) // the entry is there: Read cannot fail
	}
	return &Gates{snap: snap, taken: true, stopped: make(chan struct{})}
}

// Enabled reports whether gate was given to New.
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

// Snapshot returns the snapshot New built.
func (g *Gates) Snapshot() (featuregate.Snapshot, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.snap, g.taken
}

// StopRequested is closed by Change; never for the zero value.
func (g *Gates) StopRequested() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
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
	if g.reason != "" || g.stopped == nil {
		return
	}
	g.reason = reason
	close(g.stopped)
}

// StopReason returns what Change was given, and whether it was called.
func (g *Gates) StopReason() (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.reason, g.reason != ""
}
