package featuregate

import (
	"errors"
	"fmt"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// defaultName is the name of the cluster's one FeatureGate.
const defaultName = "cluster"

// Snapshot is the feature configuration read from a FeatureGate at one
// instant. It is a value: nothing changes it once read.
type Snapshot struct {
	featureSet     configv1.FeatureSet
	customEnabled  sets.Set[configv1.FeatureGateName]
	customDisabled sets.Set[configv1.FeatureGateName]

	version string
	// hasStatus is true when version is set and status has an entry for it.
	hasStatus      bool
	statusEnabled  sets.Set[configv1.FeatureGateName]
	statusDisabled sets.Set[configv1.FeatureGateName]

	// parts are the values of the snapshot's parts (part.go), in the
	// order the guard takes them.
	parts []partValue
}

// Read is the one reader of a FeatureGate: the guard's startup snapshot, its
// live comparisons, and any tool that answers for a cluster are built here.
// With a version, the snapshot carries that version's status.featureGates
// entry, and a FeatureGate without one is an error, not an empty gate list:
// during an upgrade the new version's entry appears after the new operator
// starts, and gates read before then would be a guess. Without a version
// only spec.customNoUpgrade names gates.
func Read(fg *configv1.FeatureGate, version string) (Snapshot, error) {
	if fg == nil {
		return Snapshot{}, errors.New("no FeatureGate")
	}
	s := build(fg, version)
	if version != "" && !s.hasStatus {
		return Snapshot{}, fmt.Errorf("FeatureGate %s has no status.featureGates entry for version %s yet", fg.Name, version)
	}
	return s, nil
}

// build is Read without the completeness check: a live view whose entry has
// gone is still compared with the snapshot, and the difference reported.
func build(fg *configv1.FeatureGate, version string) Snapshot {
	s := Snapshot{
		featureSet:     fg.Spec.FeatureSet,
		customEnabled:  sets.New[configv1.FeatureGateName](),
		customDisabled: sets.New[configv1.FeatureGateName](),
		version:        version,
		statusEnabled:  sets.New[configv1.FeatureGateName](),
		statusDisabled: sets.New[configv1.FeatureGateName](),
	}
	if fg.Spec.FeatureSet == "Default" {
		s.featureSet = configv1.Default
	}
	if c := fg.Spec.CustomNoUpgrade; c != nil {
		s.customEnabled = sets.New(c.Enabled...)
		s.customDisabled = sets.New(c.Disabled...)
	}
	if version == "" {
		return s
	}
	for _, details := range fg.Status.FeatureGates {
		if details.Version != version {
			continue
		}
		s.hasStatus = true
		s.statusEnabled = attributeNames(details.Enabled)
		s.statusDisabled = attributeNames(details.Disabled)
		break
	}
	return s
}

// FeatureSetName is the feature set as people and release manifests spell
// it: the empty set is "Default".
func (s Snapshot) FeatureSetName() string {
	if s.featureSet == configv1.Default {
		return "Default"
	}
	return string(s.featureSet)
}

// Version is the release version whose status entry the snapshot carries.
func (s Snapshot) Version() string { return s.version }

// Enabled reports whether gate is on. With a version it answers from that
// version's status entry; without one, from spec.customNoUpgrade when the
// feature set is CustomNoUpgrade, and false otherwise (only spec.customNoUpgrade names gates). A
// gate it does not know is not enabled: it never panics, unlike readers
// that broke operators when CustomNoUpgrade came without lists.
func (s Snapshot) Enabled(gate configv1.FeatureGateName) bool {
	if s.hasStatus {
		return s.statusEnabled.Has(gate)
	}
	if s.featureSet == configv1.CustomNoUpgrade {
		return s.customEnabled.Has(gate)
	}
	return false
}

// KnownFeatures lists, sorted, every gate the snapshot has a state for.
func (s Snapshot) KnownFeatures() []configv1.FeatureGateName {
	if s.hasStatus {
		return sets.List(s.statusEnabled.Union(s.statusDisabled))
	}
	if s.featureSet == configv1.CustomNoUpgrade {
		return sets.List(s.customEnabled.Union(s.customDisabled))
	}
	return nil
}

// String is the snapshot as logged: the feature set, then the gates in use.
func (s Snapshot) String() string {
	var b strings.Builder
	b.WriteString(s.FeatureSetName())
	if s.featureSet == configv1.CustomNoUpgrade {
		fmt.Fprintf(&b, " (customNoUpgrade enabled %v, disabled %v)", sets.List(s.customEnabled), sets.List(s.customDisabled))
	}
	if s.hasStatus {
		fmt.Fprintf(&b, " (version %s: enabled %v, disabled %v)", s.version, sets.List(s.statusEnabled), sets.List(s.statusDisabled))
	}
	for _, p := range s.parts {
		fmt.Fprintf(&b, "; %s %v", p.key.label, p.value)
	}
	return b.String()
}

func attributeNames(in []configv1.FeatureGateAttributes) sets.Set[configv1.FeatureGateName] {
	out := sets.New[configv1.FeatureGateName]()
	for _, a := range in {
		out.Insert(a.Name)
	}
	return out
}
