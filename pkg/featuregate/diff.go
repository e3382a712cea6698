package featuregate

import (
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Diff explains, one sentence per change, how live differs from snapshot. An
// empty result means they are equal for the snapshot's View; that comparison
// is the whole restart decision. Gate changes outside the snapshot's
// WatchedGates are not reported.
func Diff(snapshot, live Snapshot) []string {
	var out []string
	if snapshot.featureSet != live.featureSet {
		out = append(out, fmt.Sprintf("feature set changed from %s to %s", snapshot.FeatureSetName(), live.FeatureSetName()))
	}
	out = append(out, diffSet("customNoUpgrade.enabled", snapshot.watch(snapshot.customEnabled), snapshot.watch(live.customEnabled))...)
	out = append(out, diffSet("customNoUpgrade.disabled", snapshot.watch(snapshot.customDisabled), snapshot.watch(live.customDisabled))...)
	switch {
	case snapshot.version != live.version:
		out = append(out, fmt.Sprintf("version changed from %q to %q", snapshot.version, live.version))
	case snapshot.hasStatus && !live.hasStatus:
		out = append(out, fmt.Sprintf("status.featureGates entry for version %s removed", snapshot.version))
	case !snapshot.hasStatus && live.hasStatus:
		out = append(out, fmt.Sprintf("status.featureGates entry for version %s appeared", live.version))
	case snapshot.hasStatus:
		gates := snapshot.statusEnabled.Union(snapshot.statusDisabled).Union(live.statusEnabled).Union(live.statusDisabled)
		for _, g := range sets.List(snapshot.watch(gates)) {
			was, is := snapshot.gateState(g), live.gateState(g)
			if was != is {
				out = append(out, fmt.Sprintf("gate %s %s -> %s in status for version %s", g, was, is, live.version))
			}
		}
	}
	return out
}

// Equal reports whether Diff finds nothing.
func Equal(a, b Snapshot) bool { return len(Diff(a, b)) == 0 }

// watch narrows gates to the watched ones, when any are named.
func (s Snapshot) watch(gates sets.Set[configv1.FeatureGateName]) sets.Set[configv1.FeatureGateName] {
	if s.watched.Len() == 0 {
		return gates
	}
	return gates.Intersection(s.watched)
}

func (s Snapshot) gateState(gate configv1.FeatureGateName) string {
	switch {
	case s.statusEnabled.Has(gate):
		return "enabled"
	case s.statusDisabled.Has(gate):
		return "disabled"
	default:
		return "absent"
	}
}

func diffSet(field string, was, is sets.Set[configv1.FeatureGateName]) []string {
	var out []string
	if added := is.Difference(was); added.Len() > 0 {
		out = append(out, fmt.Sprintf("%s added %v", field, sets.List(added)))
	}
	if removed := was.Difference(is); removed.Len() > 0 {
		out = append(out, fmt.Sprintf("%s removed %v", field, sets.List(removed)))
	}
	return out
}
