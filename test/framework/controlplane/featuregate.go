package controlplane

import (
	configv1 "github.com/openshift/api/config/v1"

	"github.com/featuregate-operator/operator/pkg/featuregate/featuregatetest"
)

// The FeatureGate fixture every test, the bench and run-local build
// FeatureGates with is the library's own, so that the operator's tests and
// an adopter's build the same objects.
type FeatureGateOption = featuregatetest.FeatureGateOption

var (
	FeatureGate       = featuregatetest.FeatureGate
	Named             = featuregatetest.Named
	CustomGates       = featuregatetest.CustomGates
	StatusGates       = featuregatetest.StatusGates
	CreateFeatureGate = featuregatetest.CreateFeatureGate
)

// GateDetails is a status.featureGates entry, built as StatusGates builds
// it (never-nil lists: the API server is sent [] rather than null).
func GateDetails(version string, enabled, disabled []string) configv1.FeatureGateDetails {
	return FeatureGate("", StatusGates(version, enabled, disabled)).Status.FeatureGates[0]
}

// GateAttributes lists gates the way status.featureGates does.
func GateAttributes(names ...string) []configv1.FeatureGateAttributes {
	return GateDetails("", names, nil).Enabled
}
