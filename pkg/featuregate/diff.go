package featuregate

import (
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// diff explains, one sentence per change, how live differs from snapshot. An
// empty result means they are equal; that comparison is the whole restart
// decision. When watched is not empty, changes of other gates are not
// reported: gates a component does not consume never restart it.
func diff(snapshot, live Snapshot, watched sets.Set[configv1.FeatureGateName]) []string {
	narrow := func(gates sets.Set[configv1.FeatureGateName]) sets.Set[configv1.FeatureGateName] {
		if watched.Len() == 0 {
			return gates
		}
		return gates.Intersection(watched)
	}
	var out []string
	if snapshot.featureSet != live.featureSet {
		out = append(out, fmt.Sprintf("feature set changed from %s to %s", snapshot.FeatureSetName(), live.FeatureSetName()))
	}
	out = append(out, diffSet("customNoUpgrade.enabled", narrow(snapshot.customEnabled), narrow(live.customEnabled))...)
	out = append(out, diffSet("customNoUpgrade.disabled", narrow(snapshot.customDisabled), narrow(live.customDisabled))...)
	switch {
	case snapshot.version != live.version:
		out = append(out, fmt.Sprintf("version changed from %q to %q", snapshot.version, live.version))
	case snapshot.hasStatus && !live.hasStatus:
		out = append(out, fmt.Sprintf("status.featureGates entry for version %s removed", snapshot.version))
	case !snapshot.hasStatus && live.hasStatus:
		out = append(out, fmt.Sprintf("status.featureGates entry for version %s appeared", live.version))
	case snapshot.hasStatus:
		gates := snapshot.statusEnabled.Union(snapshot.statusDisabled).Union(live.statusEnabled).Union(live.statusDisabled)
		for _, g := range sets.List(narrow(gates)) {
			was, is := snapshot.gateState(g), live.gateState(g)
			if was != is {
				out = append(out, fmt.Sprintf("gate %s %s -> %s in status for version %s", g, was, is, live.version))
			}
		}
	}
	return out
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
