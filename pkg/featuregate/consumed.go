package featuregate

import (
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// consumed is what a component acts on of the FeatureGate, and so the only
// changes that restart it (Options.WatchedGates, Options.WatchFeatureSet).
type consumed struct {
	// gates narrows the gates; empty means all of them.
	gates sets.Set[configv1.FeatureGateName]
	// featureSet is true when the component reads spec.featureSet itself
	// (manifest inclusion by the release.openshift.io/feature-set
	// annotation), not only through the gates it enables.
	featureSet bool
}

// changes is how a live view differs from the snapshot in what the
// component consumes, one sentence per change.
type changes struct {
	// featureSet is the feature-set change, "" when there is none or the
	// component does not consume the feature set.
	featureSet string
	// gates are the consumed gates whose state changed.
	gates []string
}

func (c changes) none() bool { return c.featureSet == "" && len(c.gates) == 0 }

// sentences lists every change, the feature set first.
func (c changes) sentences() []string {
	if c.featureSet == "" {
		return c.gates
	}
	return append([]string{c.featureSet}, c.gates...)
}

// diff explains how live differs from snapshot in what c consumes; no
// change means no restart, which makes it the whole restart decision.
//
// A gate's state is what Enabled answers for it: from the release
// version's status.featureGates entry when there is a version, and from
// spec.customNoUpgrade otherwise. So with a version a change of
// spec.customNoUpgrade restarts only once cluster-config-operator has
// rewritten the entry from it, as library-go's FeatureGateAccess does, and
// a spec.featureSet change restarts only a component that consumes it.
func diff(snapshot, live Snapshot, c consumed) changes {
	var out changes
	if c.featureSet && snapshot.featureSet != live.featureSet {
		out.featureSet = fmt.Sprintf("feature set changed from %s to %s", snapshot.FeatureSetName(), live.FeatureSetName())
	}
	switch {
	case snapshot.version != "" && snapshot.hasStatus && !live.hasStatus:
		out.gates = append(out.gates, fmt.Sprintf("status.featureGates entry for version %s removed", snapshot.version))
		return out
	case snapshot.version != "" && !snapshot.hasStatus && live.hasStatus:
		out.gates = append(out.gates, fmt.Sprintf("status.featureGates entry for version %s appeared", live.version))
		return out
	}
	was, is := snapshot.gateStates(), live.gateStates()
	names := sets.KeySet(was).Union(sets.KeySet(is))
	if c.gates.Len() > 0 {
		names = names.Intersection(c.gates)
	}
	for _, g := range sets.List(names) {
		if from, to := stateOf(was, g), stateOf(is, g); from != to {
			out.gates = append(out.gates, fmt.Sprintf("gate %s %s -> %s in %s", g, from, to, live.gateSource()))
		}
	}
	return out
}

// gateStates is every gate Enabled knows, enabled (true) or disabled.
func (s Snapshot) gateStates() map[configv1.FeatureGateName]bool {
	enabled, disabled := s.statusEnabled, s.statusDisabled
	if !s.hasStatus {
		if s.version != "" || s.featureSet != configv1.CustomNoUpgrade {
			return nil
		}
		enabled, disabled = s.customEnabled, s.customDisabled
	}
	out := make(map[configv1.FeatureGateName]bool, enabled.Len()+disabled.Len())
	for g := range disabled {
		out[g] = false
	}
	for g := range enabled {
		out[g] = true // listed as both: Enabled says enabled
	}
	return out
}

// gateSource names where the gates' states come from, for the diff.
func (s Snapshot) gateSource() string {
	if s.version != "" {
		return "status for version " + s.version
	}
	return "spec.customNoUpgrade"
}

func stateOf(states map[configv1.FeatureGateName]bool, gate configv1.FeatureGateName) string {
	enabled, known := states[gate]
	switch {
	case !known:
		return "absent"
	case enabled:
		return "enabled"
	default:
		return "disabled"
	}
}
