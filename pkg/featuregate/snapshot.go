package featuregate

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// DefaultName is the name of the cluster's one FeatureGate.
const DefaultName = "cluster"

// Options says which parts of a FeatureGate matter to the component.
type Options struct {
	// Name of the FeatureGate; DefaultName when empty.
	Name string
	// Version is the component's release version. When set, the snapshot
	// carries the status.featureGates entry for it and is not taken until
	// that entry exists.
	Version string
	// WatchedGates, when not empty, narrows every gate list to these names,
	// so that gates the component does not consume never cause a restart.
	WatchedGates []string
}

// ObjectName is the FeatureGate name the options refer to.
func (o Options) ObjectName() string {
	if o.Name == "" {
		return DefaultName
	}
	return o.Name
}

// ErrVersionMissing is returned by Complete when a version is configured and
// the FeatureGate's status has no entry for it yet.
var ErrVersionMissing = errors.New("no status.featureGates entry for the configured version")

// Snapshot is the feature configuration read from a FeatureGate at one
// instant. It is a value: nothing changes it after New returns, and two
// Snapshots are equal exactly when Diff finds nothing.
type Snapshot struct {
	featureSet     configv1.FeatureSet
	customEnabled  sets.Set[string]
	customDisabled sets.Set[string]

	version string
	// hasStatus is true when version is set and status has an entry for it.
	hasStatus      bool
	statusEnabled  sets.Set[string]
	statusDisabled sets.Set[string]
}

// New builds the view of fg that matters under opts. The startup snapshot and
// every live view are built here, so both sides of a comparison are made the
// same way. A nil fg is rejected: an absent FeatureGate is no feature set.
func New(fg *configv1.FeatureGate, opts Options) (Snapshot, error) {
	if fg == nil {
		return Snapshot{}, errors.New("no FeatureGate")
	}
	keep := func(names []string) sets.Set[string] {
		s := sets.New(names...)
		if len(opts.WatchedGates) > 0 {
			s = s.Intersection(sets.New(opts.WatchedGates...))
		}
		return s
	}
	s := Snapshot{
		featureSet:     fg.Spec.FeatureSet,
		customEnabled:  sets.New[string](),
		customDisabled: sets.New[string](),
		version:        opts.Version,
		statusEnabled:  sets.New[string](),
		statusDisabled: sets.New[string](),
	}
	if fg.Spec.FeatureSet == "Default" {
		s.featureSet = configv1.Default
	}
	if c := fg.Spec.CustomNoUpgrade; c != nil {
		s.customEnabled = keep(gateNames(c.Enabled))
		s.customDisabled = keep(gateNames(c.Disabled))
	}
	if opts.Version == "" {
		return s, nil
	}
	for _, details := range fg.Status.FeatureGates {
		if details.Version != opts.Version {
			continue
		}
		s.hasStatus = true
		s.statusEnabled = keep(attributeNames(details.Enabled))
		s.statusDisabled = keep(attributeNames(details.Disabled))
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

// Enabled reports whether gate is on. With a version it answers from that
// version's status entry; without one, from spec.customNoUpgrade when the
// feature set is CustomNoUpgrade. A gate it does not know is not enabled: it
// never panics, unlike readers that broke operators when CustomNoUpgrade
// came without lists.
func (s Snapshot) Enabled(gate configv1.FeatureGateName) bool {
	if s.hasStatus {
		return s.statusEnabled.Has(string(gate))
	}
	if s.featureSet == configv1.CustomNoUpgrade {
		return s.customEnabled.Has(string(gate))
	}
	return false
}

// EnabledGates lists, sorted, the gates the status entry enables.
func (s Snapshot) EnabledGates() []string { return sets.List(s.statusEnabled) }

// DisabledGates lists, sorted, the gates the status entry disables.
func (s Snapshot) DisabledGates() []string { return sets.List(s.statusDisabled) }

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

func gateNames(in []configv1.FeatureGateName) []string {
	out := make([]string, 0, len(in))
	for _, n := range in {
		out = append(out, string(n))
	}
	sort.Strings(out)
	return out
}

func attributeNames(in []configv1.FeatureGateAttributes) []string {
	out := make([]string, 0, len(in))
	for _, a := range in {
		out = append(out, string(a.Name))
	}
	return out
}
