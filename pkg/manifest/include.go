package manifest

import (
	"fmt"
	"strings"

	configv1 "github.com/openshift/api/config/v1"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Annotations that decide inclusion, as in openshift/library-go pkg/manifest.
const (
	// FeatureSetAnnotation lists the feature sets a manifest applies in,
	// comma separated, e.g. "Default,TechPreviewNoUpgrade".
	FeatureSetAnnotation = "release.openshift.io/feature-set"
	// FeatureGateAnnotation is either a list of feature set names (its
	// meaning in 4.10 and 4.11 payloads) or a list of gates that must be
	// enabled ("GateA") or not enabled ("-GateB").
	FeatureGateAnnotation = "release.openshift.io/feature-gate"
	// DeleteAnnotation set to "true" asks for the object to be removed
	// rather than applied.
	DeleteAnnotation = "release.openshift.io/delete"
	// ProfileAnnotationPrefix followed by a cluster profile name, set to
	// "true", includes a manifest in that profile.
	ProfileAnnotationPrefix = "include.release.openshift.io/"
)

// Decision is the outcome of Include. At most one of Included and Skipped
// is true; when both are false the manifest is excluded.
type Decision struct {
	// Included means the manifest should be applied.
	Included bool
	// Skipped means the manifest asks for deletion; it is not applied
	// (and this package does not delete anything).
	Skipped bool
	// Reason names the annotation and value that decided, for people.
	Reason string
}

// State is "included", "skipped" or "excluded".
func (d Decision) State() string {
	switch {
	case d.Included:
		return "included"
	case d.Skipped:
		return "skipped"
	default:
		return "excluded"
	}
}

func (d Decision) String() string { return d.State() + ": " + d.Reason }

// Include decides whether obj applies to a cluster with features f in
// cluster profile profile (empty: profile annotations are ignored). A nil
// obj has no annotations; a nil f is the Default feature set with no gate
// enabled.
//
// Checks run in this order and the first that excludes decides:
//
//  1. Profile: with a profile P, only manifests annotated
//     include.release.openshift.io/P: "true" are included.
//  2. Delete: release.openshift.io/delete: "true" is skipped, whatever its
//     feature annotations say.
//  3. Feature annotations, below.
//
// release.openshift.io/feature-set requires the cluster's feature set to be
// one of its comma-separated names; an empty or unknown name excludes.
// release.openshift.io/feature-gate made only of feature set names is the
// 4.10/4.11 spelling of feature-set and is read as such; having it and
// feature-set together is ambiguous and excludes. Any other feature-gate
// value is a list of gates: "Gate" must be enabled and "-Gate" must not be;
// with feature-set, both annotations must hold. Without either annotation a
// manifest applies in every feature set.
//
// This follows openshift/library-go's Manifest.Include, except that the old
// feature-set-valued feature-gate annotation is understood: reading
// "TechPreviewNoUpgrade" as a gate name excluded such manifests everywhere.
func Include(obj *unstructured.Unstructured, f Features, profile string) Decision {
	var annotations map[string]string
	if obj != nil {
		annotations = obj.GetAnnotations()
	}
	return includeAnnotations(annotations, f, profile)
}

func includeAnnotations(annotations map[string]string, f Features, profile string) Decision {
	if f == nil {
		f = FeatureSetOnly(Default)
	}
	var reasons []string

	if profile != "" {
		key := ProfileAnnotationPrefix + profile
		v, ok := annotations[key]
		switch {
		case !ok:
			return excluded("%s is not set (cluster profile %q)", key, profile)
		case v != "true":
			return excluded("%s: %q is not \"true\"", key, v)
		}
		reasons = append(reasons, fmt.Sprintf("%s: %q", key, v))
	}

	if v := annotations[DeleteAnnotation]; v == "true" {
		return Decision{Skipped: true, Reason: fmt.Sprintf("%s: %q", DeleteAnnotation, v)}
	}

	set := normalizeFeatureSet(f.FeatureSetName())
	fsValue, hasFS := annotations[FeatureSetAnnotation]
	fgValue, hasFG := annotations[FeatureGateAnnotation]
	fgItems := splitList(fgValue)
	fgIsSets := hasFG && len(fgItems) > 0 && allKnownFeatureSets(fgItems)

	if hasFG && len(fgItems) == 0 {
		return excluded("%s: %q names no feature gate or feature set", FeatureGateAnnotation, fgValue)
	}
	if hasFS && fgIsSets {
		return excluded("%s: %q and %s: %q both name feature sets; use either, not both",
			FeatureSetAnnotation, fsValue, FeatureGateAnnotation, fgValue)
	}
	if hasFS {
		r, ok := checkFeatureSets(FeatureSetAnnotation, fsValue, set)
		if !ok {
			return excluded("%s", r)
		}
		reasons = append(reasons, r)
	}
	if hasFG {
		var (
			r  string
			ok bool
		)
		if fgIsSets {
			r, ok = checkFeatureSets(FeatureGateAnnotation, fgValue, set)
		} else {
			r, ok = checkFeatureGates(fgValue, fgItems, f)
		}
		if !ok {
			return excluded("%s", r)
		}
		reasons = append(reasons, r)
	}
	if !hasFS && !hasFG {
		reasons = append(reasons, fmt.Sprintf("no %s or %s annotation", FeatureSetAnnotation, FeatureGateAnnotation))
	}
	return Decision{Included: true, Reason: strings.Join(reasons, "; ")}
}

func excluded(format string, args ...interface{}) Decision {
	return Decision{Reason: fmt.Sprintf(format, args...)}
}

// checkFeatureSets reports whether set is listed in the value of annotation
// key, and why.
func checkFeatureSets(key, value, set string) (string, bool) {
	items := splitList(value)
	if len(items) == 0 {
		return fmt.Sprintf("%s: %q names no feature set", key, value), false
	}
	found := false
	for _, item := range items {
		if !isKnownFeatureSet(item) {
			return fmt.Sprintf("unknown feature set %q in %s: %q (known: %s)",
				item, key, value, strings.Join(knownFeatureSets, ", ")), false
		}
		found = found || item == set
	}
	if !found {
		return fmt.Sprintf("%s: %q does not include feature set %s", key, value, set), false
	}
	return fmt.Sprintf("%s: %q includes feature set %s", key, value, set), true
}

// checkFeatureGates reports whether every requirement of the gate list holds.
func checkFeatureGates(value string, items []string, f Features) (string, bool) {
	for _, item := range items {
		gate, negated := strings.CutPrefix(item, "-")
		gate = strings.TrimSpace(gate)
		switch {
		case gate == "":
			return fmt.Sprintf("%s: %q has an empty gate name in %q", FeatureGateAnnotation, value, item), false
		case negated && f.Enabled(configv1.FeatureGateName(gate)):
			return fmt.Sprintf("feature gate %s is enabled and %s: %q requires it not enabled", gate, FeatureGateAnnotation, value), false
		case !negated && !f.Enabled(configv1.FeatureGateName(gate)):
			return fmt.Sprintf("feature gate %s is not enabled and %s: %q requires it", gate, FeatureGateAnnotation, value), false
		}
	}
	return fmt.Sprintf("%s: %q is satisfied", FeatureGateAnnotation, value), true
}

// splitList splits a comma-separated annotation value, trimming spaces and
// dropping empty items.
func splitList(value string) []string {
	var items []string
	for _, item := range strings.Split(value, ",") {
		if item = strings.TrimSpace(item); item != "" {
			items = append(items, item)
		}
	}
	return items
}

func allKnownFeatureSets(items []string) bool {
	for _, item := range items {
		if !isKnownFeatureSet(item) {
			return false
		}
	}
	return true
}
