package clusterinputs

import (
	"fmt"
	"slices"

	configv1 "github.com/openshift/api/config/v1"

	"github.com/featuregate-operator/operator/pkg/manifest"
)

// ClusterVersionName is the cluster's one ClusterVersion, the only one
// read: an OpenShift cluster has no other, and the guard reads the same.
const ClusterVersionName = "version"

// The Applier reads it before every run.
// +kubebuilder:rbac:groups=config.openshift.io,resources=clusterversions,verbs=get,resourceNames=version

// Inputs are the inclusion inputs the cluster holds outside the FeatureGate:
// the ClusterVersion's capabilities and overrides. They are read, never
// guessed: capabilities can be enabled at any time (never disabled), and a
// newly enabled one is applied by the next run without a restart, unlike a
// feature set change, which restarts.
type Inputs struct {
	// Capabilities are nil when the filter is off; Off says why.
	Capabilities *manifest.Capabilities
	Overrides    []configv1.ComponentOverride
	Off          string
}

// FromClusterVersion are the inputs cv holds: its capabilities (none when
// its status knows none yet, which turns the filter off rather than
// excluding every annotated manifest) and its overrides.
func FromClusterVersion(cv *configv1.ClusterVersion) Inputs {
	in := Inputs{Overrides: slices.Clone(cv.Spec.Overrides)}
	status := cv.Status.Capabilities
	if len(status.KnownCapabilities) == 0 {
		in.Off = fmt.Sprintf("ClusterVersion %s has no status.capabilities yet", cv.Name)
		return in
	}
	in.Capabilities = &manifest.Capabilities{Known: slices.Clone(status.KnownCapabilities), Enabled: slices.Clone(status.EnabledCapabilities)}
	return in
}

// Filter says, for the log and the ClusterOperator, what the capability
// filter does.
func (in Inputs) Filter() string {
	if in.Capabilities == nil {
		return "off: " + in.Off
	}
	return fmt.Sprintf("on: %d of %d known capabilities enabled", len(in.Capabilities.Enabled), len(in.Capabilities.Known))
}
