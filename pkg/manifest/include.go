package manifest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Annotations that decide inclusion, as in openshift/library-go pkg/manifest
// and the cluster-version-operator.
const (
	// ExcludeAnnotationPrefix followed by an identifier, set to "true",
	// excludes a manifest from clusters with that exclude identifier.
	excludeAnnotationPrefix = "exclude.release.openshift.io/"
	// FeatureSetAnnotation lists the feature sets a manifest applies in,
	// comma separated, e.g. "Default,TechPreviewNoUpgrade".
	featureSetAnnotation = "release.openshift.io/feature-set"
	// FeatureGateAnnotation lists gates that must be enabled ("GateA") or
	// not enabled ("-GateB"). A value made only of feature set names is the
	// 4.10/4.11 spelling of FeatureSetAnnotation and is read as such.
	featureGateAnnotation = "release.openshift.io/feature-gate"
	// MajorVersionAnnotation lists major versions a FeatureGate or
	// CustomResourceDefinition applies in ("4") or does not ("-5").
	majorVersionAnnotation = "release.openshift.io/major-version"
	// ProfileAnnotationPrefix followed by a cluster profile name, set to
	// "true", includes a manifest in that profile.
	profileAnnotationPrefix = "include.release.openshift.io/"
	// CapabilityAnnotation lists, "+" separated, the capabilities that must
	// all be enabled.
	capabilityAnnotation = "capability.openshift.io/name"
	// DeleteAnnotation set to "true" asks for the object to be deleted
	// rather than applied; any other value is an error (Decision.Invalid).
	deleteAnnotation = "release.openshift.io/delete"
	// CreateOnlyAnnotation set to "true", in any case, asks for the object
	// to be created when absent and never updated.
	createOnlyAnnotation = "release.openshift.io/create-only"
)

// Cluster is everything about a cluster that inclusion depends on. The zero
// value is a Default cluster with no gate enabled and every other filter off.
type Cluster struct {
	// Features is the feature set and gates; nil is Default with no gate enabled.
	Features Features
	// Profile is the cluster profile; empty turns the profile filter off
	// (library-go: a nil profile).
	Profile string
	// Capabilities are the ClusterVersion's status.capabilities; nil turns
	// the capability filter off (no ClusterVersion, or none served).
	Capabilities *Capabilities
	// MajorVersion is the release's major version (4 for 4.22.0); nil turns
	// the major-version filter off.
	MajorVersion *uint64
	// ExcludeIdentifier selects exclude.release.openshift.io/<identifier>;
	// empty turns the filter off.
	ExcludeIdentifier string
	// Overrides are the ClusterVersion's spec.overrides; an unmanaged
	// override excludes the manifest of its object.
	Overrides []configv1.ComponentOverride
}

// Capabilities are a ClusterVersion's known and enabled capabilities.
type Capabilities struct {
	Known   []configv1.ClusterVersionCapability
	Enabled []configv1.ClusterVersionCapability
}

// KnownCapabilities are the capabilities the pinned openshift/api knows, for
// callers that have a list of enabled capabilities but no ClusterVersion.
// The caller may modify the returned slice.
func KnownCapabilities() []configv1.ClusterVersionCapability {
	return slices.Clone(configv1.KnownClusterVersionCapabilities)
}

// Decision is the outcome of Include. At most one of Included, Delete and
// Invalid is true; when all are false the manifest is excluded.
type Decision struct {
	// Included means the manifest should be applied.
	Included bool
	// Delete means the manifest passes every inclusion rule and is
	// annotated release.openshift.io/delete: "true": its object is to be
	// deleted, not applied.
	Delete bool
	// CreateOnly, only with Included, means the manifest is annotated
	// release.openshift.io/create-only: "true" (in any case): its object is
	// to be created when absent and then left alone.
	CreateOnly bool
	// Invalid means the manifest passes every inclusion rule but carries an
	// annotation value the cluster-version-operator refuses
	// (release.openshift.io/delete other than "true"): it is neither applied
	// nor deleted, and Decide reports it as an *InvalidError.
	Invalid bool
	// Reason names the annotations and values that decided, for people.
	Reason string
}

// State is "included", "create-only", "delete", "invalid" or "excluded".
func (d Decision) State() string {
	switch {
	case d.Included && d.CreateOnly:
		return "create-only"
	case d.Included:
		return "included"
	case d.Delete:
		return "delete"
	case d.Invalid:
		return "invalid"
	default:
		return "excluded"
	}
}

func (d Decision) String() string { return d.State() + ": " + d.Reason }

// Include decides what becomes of obj on cluster c. A nil obj has no
// annotations and no kind.
//
// The rules are openshift/library-go's Manifest.Include (what the
// cluster-version-operator runs), in its order; the first that excludes
// decides:
//
//  1. exclude.release.openshift.io/<c.ExcludeIdentifier>: "true" excludes.
//  2. release.openshift.io/feature-set and release.openshift.io/feature-gate
//     together exclude, whatever their values.
//  3. feature-set: the cluster's feature set must be one of its
//     comma-separated names, taken as written (no trimming); a name that is
//     not a known feature set excludes.
//  4. feature-gate: each comma-separated item, trimmed, empty ones ignored,
//     is a gate that must be enabled, or with a leading "-" must not be.
//  5. release.openshift.io/major-version, with c.MajorVersion: a list such
//     as "4,-5" of versions that include and exclude; only FeatureGate and
//     CustomResourceDefinition objects may carry it.
//  6. With c.Profile: include.release.openshift.io/<profile> must be "true".
//  7. With c.Capabilities: every "+"-separated name of
//     capability.openshift.io/name must be known, then enabled.
//  8. An unmanaged entry of c.Overrides for the object excludes it.
//
// A manifest passing them all is included, unless it carries
// release.openshift.io/delete: "true" makes the decision Delete, and any
// other value makes it Invalid (the cluster-version-operator refuses it). An
// included manifest with release.openshift.io/create-only: "true", in any
// case, is CreateOnly.
//
// Differences from library-go, on purpose: a feature-gate value made only
// of known feature set names (e.g. "TechPreviewNoUpgrade", the 4.10 spelling)
// is checked as a feature-set list at step 4, where library-go requires a
// gate of that name and so excludes such manifests everywhere; and a
// manifest with no annotations at all is not excluded for that alone
// (library-go excludes it, "no annotations"; with a profile step 6 excludes
// it anyway).
func Include(obj *unstructured.Unstructured, c Cluster) Decision {
	var annotations map[string]string
	if obj != nil {
		annotations = obj.GetAnnotations()
	}
	features := c.Features
	if features == nil {
		features = NewFeatures(defaultSet)
	}
	set := normalizeFeatureSet(features.FeatureSetName())
	var reasons []string

	if c.ExcludeIdentifier != "" {
		key := excludeAnnotationPrefix + c.ExcludeIdentifier
		if v := annotations[key]; v == "true" {
			return excluded("%s: %q excludes it (exclude identifier %q)", key, v, c.ExcludeIdentifier)
		}
	}

	fsValue, hasFS := annotations[featureSetAnnotation]
	fgValue, hasFG := annotations[featureGateAnnotation]
	if hasFS && hasFG {
		return excluded("%s: %q and %s: %q are both set; a manifest may have either a feature set or a feature gate, but not both",
			featureSetAnnotation, fsValue, featureGateAnnotation, fgValue)
	}
	if hasFS {
		r, ok := checkFeatureSets(featureSetAnnotation, fsValue, set)
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
		if isOldFeatureSetSpelling(fgValue) {
			r, ok = checkFeatureSets(featureGateAnnotation, fgValue, set)
			r += " (4.10 spelling of " + featureSetAnnotation + ")"
		} else {
			r, ok = checkFeatureGates(fgValue, features)
		}
		if !ok {
			return excluded("%s", r)
		}
		reasons = append(reasons, r)
	}
	if !hasFS && !hasFG {
		reasons = append(reasons, fmt.Sprintf("no %s or %s annotation", featureSetAnnotation, featureGateAnnotation))
	}

	if v, ok := annotations[majorVersionAnnotation]; ok && c.MajorVersion != nil {
		r, ok := checkMajorVersion(obj, v, *c.MajorVersion)
		if !ok {
			return excluded("%s", r)
		}
		reasons = append(reasons, r)
	}

	if c.Profile != "" {
		key := profileAnnotationPrefix + c.Profile
		v, ok := annotations[key]
		switch {
		case !ok:
			return excluded("%s is not set (cluster profile %q)", key, c.Profile)
		case v != "true":
			return excluded("%s: %q is not \"true\"", key, v)
		}
		reasons = append(reasons, fmt.Sprintf("%s: %q", key, v))
	}

	if c.Capabilities != nil {
		r, ok := checkCapabilities(annotations, c.Capabilities)
		if !ok {
			return excluded("%s", r)
		}
		if r != "" {
			reasons = append(reasons, r)
		}
	}

	if o := overrideFor(obj, c.Overrides); o != nil && o.Unmanaged {
		return excluded("ClusterVersion spec.overrides marks %s unmanaged", IDOf(obj))
	}

	if v, ok := annotations[deleteAnnotation]; ok {
		return deleteDecision(reasons, v)
	}
	d := Decision{Included: true}
	if v, ok := annotations[createOnlyAnnotation]; ok {
		d.CreateOnly = isCreateOnly(v)
		reasons = append(reasons, createOnlyReason(v, d.CreateOnly))
	}
	d.Reason = strings.Join(reasons, "; ")
	return d
}

// deleteDecision decides for a manifest that every rule includes and that
// carries release.openshift.io/delete with value. Only "true", exactly,
// deletes. The cluster-version-operator refuses any other value ("false",
// "True" and "" too) with an error before it would delete or apply
// (lib/resourcedelete ValidDeleteAnnotation): applying instead would do what
// the payload author did not write, so the manifest is Invalid.
func deleteDecision(reasons []string, value string) Decision {
	if value != "true" {
		return Decision{Invalid: true, Reason: fmt.Sprintf(
			"%s: %q is not \"true\", the only value the cluster-version-operator accepts: neither applied nor deleted",
			deleteAnnotation, value)}
	}
	return Decision{Delete: true, Reason: strings.Join(append(reasons, fmt.Sprintf("%s: %q", deleteAnnotation, value)), "; ")}
}

// isCreateOnly reads a release.openshift.io/create-only value as the
// cluster-version-operator does (lib/resourceapply IsCreateOnly, a
// strings.EqualFold with "true"): "True" is create-only too, and any other
// value is an ordinary apply, not an error.
func isCreateOnly(value string) bool {
	return strings.EqualFold(value, "true")
}

// createOnlyReason says how a present create-only annotation was read, so
// that a value taken as an ordinary apply ("false", "yes") does not go
// unexplained.
func createOnlyReason(value string, createOnly bool) string {
	if createOnly {
		return fmt.Sprintf("%s: %q", createOnlyAnnotation, value)
	}
	return fmt.Sprintf("%s: %q is not \"true\" (in any case): applied as usual", createOnlyAnnotation, value)
}

func excluded(format string, args ...interface{}) Decision {
	return Decision{Reason: fmt.Sprintf(format, args...)}
}

// checkFeatureSets reports whether set is listed in the value of annotation
// key, and why. Items are not trimmed, as in library-go: " Default" is not
// a feature set.
func checkFeatureSets(key, value, set string) (string, bool) {
	items := strings.Split(value, ",")
	for _, item := range items {
		if !isKnownFeatureSet(item) {
			return fmt.Sprintf("unknown feature set %q in %s: %q (known: %s)",
				item, key, value, strings.Join(knownFeatureSets, ", ")), false
		}
	}
	if !slices.Contains(items, set) {
		return fmt.Sprintf("%s: %q does not include feature set %s", key, value, set), false
	}
	return fmt.Sprintf("%s: %q includes feature set %s", key, value, set), true
}

// isOldFeatureSetSpelling reports whether a feature-gate value is made only
// of known feature set names, as written: the 4.10/4.11 payloads used the
// annotation so ("TechPreviewNoUpgrade"), and no gate is named after a
// feature set.
func isOldFeatureSetSpelling(value string) bool {
	for _, item := range strings.Split(value, ",") {
		if !isKnownFeatureSet(item) {
			return false
		}
	}
	return true
}

// checkFeatureGates reports whether every requirement of the gate list
// holds. Items are trimmed and empty ones ignored, as in library-go, so ""
// requires nothing.
func checkFeatureGates(value string, f Features) (string, bool) {
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		gate, negated := strings.CutPrefix(item, "-")
		enabled := f.Enabled(configv1.FeatureGateName(gate))
		switch {
		case negated && enabled:
			return fmt.Sprintf("feature gate %s is enabled and %s: %q requires it not enabled", gate, featureGateAnnotation, value), false
		case !negated && !enabled:
			return fmt.Sprintf("feature gate %s is not enabled and %s: %q requires it", gate, featureGateAnnotation, value), false
		}
	}
	return fmt.Sprintf("%s: %q is satisfied", featureGateAnnotation, value), true
}

// checkMajorVersion evaluates a major-version list for obj on a cluster of
// major version major.
func checkMajorVersion(obj *unstructured.Unstructured, value string, major uint64) (string, bool) {
	key := majorVersionAnnotation
	var group, kind string
	if obj != nil {
		gvk := obj.GroupVersionKind()
		group, kind = gvk.Group, gvk.Kind
	}
	isFeatureGate := group == "config.openshift.io" && kind == "FeatureGate"
	isCRD := group == "apiextensions.k8s.io" && kind == "CustomResourceDefinition"
	if !isFeatureGate && !isCRD {
		return fmt.Sprintf("%s: %q is only allowed on FeatureGate and CustomResourceDefinition objects, not %s", key, value, kindOf(group, kind)), false
	}
	include, exclude := sets.New[uint64](), sets.New[uint64]()
	for _, item := range strings.Split(value, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		digits, negated := strings.CutPrefix(item, "-")
		v, err := strconv.ParseUint(digits, 10, 64)
		if err != nil {
			return fmt.Sprintf("%s: %q has an invalid version %q", key, value, digits), false
		}
		if negated {
			exclude.Insert(v)
		} else {
			include.Insert(v)
		}
	}
	switch both := include.Intersection(exclude); {
	case both.Len() > 0:
		return fmt.Sprintf("%s: %q both includes and excludes %v", key, value, sets.List(both)), false
	case include.Has(major):
		return fmt.Sprintf("%s: %q includes major version %d", key, value, major), true
	case exclude.Has(major):
		return fmt.Sprintf("%s: %q excludes major version %d", key, value, major), false
	case include.Len() > 0:
		return fmt.Sprintf("%s: %q does not include major version %d", key, value, major), false
	default:
		return fmt.Sprintf("%s: %q does not exclude major version %d", key, value, major), true
	}
}

func kindOf(group, kind string) string {
	if kind == "" {
		return "an object without kind"
	}
	if group == "" {
		return kind
	}
	return kind + "." + group
}

// checkCapabilities requires every capability the manifest names to be
// known and enabled; unknown names are reported before disabled ones. A
// manifest naming none passes with no reason.
func checkCapabilities(annotations map[string]string, c *Capabilities) (string, bool) {
	value := annotations[capabilityAnnotation]
	if value == "" {
		return "", true
	}
	var unknown, disabled []string
	for _, name := range strings.Split(value, "+") {
		capability := configv1.ClusterVersionCapability(name)
		switch {
		case !slices.Contains(c.Known, capability):
			unknown = append(unknown, strconv.Quote(name))
		case !slices.Contains(c.Enabled, capability):
			disabled = append(disabled, name)
		}
	}
	switch {
	case len(unknown) > 0:
		return fmt.Sprintf("%s: %q names unknown capabilities %s", capabilityAnnotation, value, strings.Join(unknown, ", ")), false
	case len(disabled) > 0:
		return fmt.Sprintf("%s: %q needs capabilities that are not enabled: %s", capabilityAnnotation, value, strings.Join(disabled, ", ")), false
	default:
		return fmt.Sprintf("%s: %q is enabled", capabilityAnnotation, value), true
	}
}

// overrideFor returns the first override naming obj's object. The
// override's namespace does not matter for a cluster-scoped object (one
// without namespace), as in the cluster-version-operator.
func overrideFor(obj *unstructured.Unstructured, overrides []configv1.ComponentOverride) *configv1.ComponentOverride {
	if obj == nil {
		return nil
	}
	id := IDOf(obj)
	for i := range overrides {
		o := &overrides[i]
		ns := o.Namespace
		if id.Namespace == "" {
			ns = ""
		}
		if (ObjectID{Group: o.Group, Kind: o.Kind, Namespace: ns, Name: o.Name}) == id {
			return o
		}
	}
	return nil
}

// ObjectID identifies an object of a payload the way the
// cluster-version-operator does: the version of its apiVersion does not
// matter.
type ObjectID struct {
	Group, Kind, Namespace, Name string
}

// IDOf is the ObjectID of obj.
func IDOf(obj *unstructured.Unstructured) ObjectID {
	gvk := obj.GroupVersionKind()
	return ObjectID{Group: gvk.Group, Kind: gvk.Kind, Namespace: obj.GetNamespace(), Name: obj.GetName()}
}

// String is e.g. "ConfigMap default/x" or "CustomResourceDefinition.apiextensions.k8s.io x".
func (id ObjectID) String() string {
	name := id.Name
	if id.Namespace != "" {
		name = id.Namespace + "/" + name
	}
	return kindOf(id.Group, id.Kind) + " " + name
}

// MajorVersion is the major version of a release version: 4 for "4.22.0"
// or "4.22.0-0.nightly-2026-01-01-000000".
func MajorVersion(release string) (uint64, error) {
	first, _, _ := strings.Cut(strings.TrimPrefix(release, "v"), ".")
	major, err := strconv.ParseUint(first, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("release version %q: major version %q is not a number", release, first)
	}
	return major, nil
}
