package featuregate

import (
	"errors"
	"fmt"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// DefaultName is the name of the cluster's one FeatureGate.
const DefaultName = "cluster"

// ErrVersionMissing is returned by Complete when a version is configured and
// the FeatureGate's status has no entry for it yet.
var ErrVersionMissing = errors.New("no status.featureGates entry for the configured version")

// View says which parts of a FeatureGate a component reads. Both sides of
// every comparison are built with the same View.
type View struct {
	// Version is the component's release version. When set, a snapshot
	// carries the status.featureGates entry for it and is not complete until
	// that entry exists. Without it only spec.customNoUpgrade names gates.
	Version string
	// WatchedGates, when not empty, narrows which gate changes Diff reports,
	// so that gates the component does not consume never cause a restart.
	// It never changes what Enabled answers.
	WatchedGates []configv1.FeatureGateName
}

// Snapshot is the feature configuration read from a FeatureGate at one
// instant. It is a value: nothing changes it after New returns.
type Snapshot struct {
	featureSet     configv1.FeatureSet
	customEnabled  sets.Set[configv1.FeatureGateName]
	customDisabled sets.Set[configv1.FeatureGateName]

	version string
	// hasStatus is true when version is set and status has an entry for it.
	hasStatus      bool
	statusEnabled  sets.Set[configv1.FeatureGateName]
	statusDisabled sets.Set[configv1.FeatureGateName]

	// watched narrows Diff's gate comparisons; empty means every gate.
	watched sets.Set[configv1.FeatureGateName]
}

// New builds the view of fg that matters under v. The startup snapshot and
// every live view are built here, so both sides of a comparison are made the
// same way. A nil fg is rejected: an absent FeatureGate is no feature set.
func New(fg *configv1.FeatureGate, v View) (Snapshot, error) {
	if fg == nil {
		return Snapshot{}, errors.New("no FeatureGate")
	}
	s := Snapshot{
		featureSet:     fg.Spec.FeatureSet,
		customEnabled:  sets.New[configv1.FeatureGateName](),
		customDisabled: sets.New[configv1.FeatureGateName](),
		version:        v.Version,
		statusEnabled:  sets.New[configv1.FeatureGateName](),
		statusDisabled: sets.New[configv1.FeatureGateName](),
		watched:        sets.New(v.WatchedGates...),
	}
	if fg.Spec.FeatureSet == "Default" {
		s.featureSet = configv1.Default
	}
	if c := fg.Spec.CustomNoUpgrade; c != nil {
		s.customEnabled = sets.New(c.Enabled...)
		s.customDisabled = sets.New(c.Disabled...)
	}
	if v.Version == "" {
		return s, nil
	}
	for _, details := range fg.Status.FeatureGates {
		if details.Version != v.Version {
			continue
		}
		s.hasStatus = true
		s.statusEnabled = attributeNames(details.Enabled)
		s.statusDisabled = attributeNames(details.Disabled)
		break
	}
	return s, nil
}

// Complete returns ErrVersionMissing when the snapshot was built for a version
// whose status entry does not exist yet: such a snapshot would only be a guess
// at which gates are on.
func (s Snapshot) Complete() error {
	if s.version != "" && !s.hasStatus {
		return fmt.Errorf("%w %s", ErrVersionMissing, s.version)
	}
	return nil
}

// FeatureSet is spec.featureSet, with "Default" normalised to the empty set.
func (s Snapshot) FeatureSet() configv1.FeatureSet { return s.featureSet }

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

// HasGateLists reports whether Enabled can answer for gates beyond
// spec.customNoUpgrade: only with a version whose status entry was read.
func (s Snapshot) HasGateLists() bool { return s.hasStatus }

// Enabled reports whether gate is on. With a version it answers from that
// version's status entry; without one, from spec.customNoUpgrade when the
// feature set is CustomNoUpgrade, and false otherwise (see HasGateLists). A
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

// EnabledGates lists, sorted, the gates the status entry enables.
func (s Snapshot) EnabledGates() []configv1.FeatureGateName { return sets.List(s.statusEnabled) }

// DisabledGates lists, sorted, the gates the status entry disables.
func (s Snapshot) DisabledGates() []configv1.FeatureGateName { return sets.List(s.statusDisabled) }

// String is the snapshot as logged: the feature set, then the gates in use.
func (s Snapshot) String() string {
	var b strings.Builder
	b.WriteString(s.FeatureSetName())
	if s.featureSet == configv1.CustomNoUpgrade {
		fmt.Fprintf(&b, " (customNoUpgrade enabled %v, disabled %v)", sets.List(s.customEnabled), sets.List(s.customDisabled))
	}
	if s.hasStatus {
		fmt.Fprintf(&b, " (version %s: enabled %v, disabled %v)", s.version, s.EnabledGates(), s.DisabledGates())
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
