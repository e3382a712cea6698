package manifest

import (
	"slices"

	configv1 "github.com/openshift/api/config/v1"
)

// Features is what inclusion needs to know of the cluster's feature configuration.
type Features interface {
	// FeatureSetName is the feature set, with the empty set spelled "Default".
	FeatureSetName() string
	// Enabled reports whether a gate is enabled for our version; unknown gates are not enabled.
	Enabled(gate configv1.FeatureGateName) bool
}

// Feature set names as they are spelled in manifest annotations. The API's
// empty feature set is spelled "Default" here, as in library-go.
const (
	Default              = "Default"
	TechPreviewNoUpgrade = "TechPreviewNoUpgrade"
	DevPreviewNoUpgrade  = "DevPreviewNoUpgrade"
	CustomNoUpgrade      = "CustomNoUpgrade"
	OKD                  = "OKD"
)

// knownFeatureSets is in the order reports show them.
var knownFeatureSets = []string{Default, TechPreviewNoUpgrade, DevPreviewNoUpgrade, CustomNoUpgrade, OKD}

// KnownFeatureSets returns the feature set names annotations may use, in
// report order. The caller may modify the returned slice.
func KnownFeatureSets() []string {
	return slices.Clone(knownFeatureSets)
}

func isKnownFeatureSet(name string) bool {
	return slices.Contains(knownFeatureSets, name)
}

// FeatureSetOnly returns Features with only a feature set and no gate
// enabled. It serves offline evaluation (no cluster to ask about gates) and
// tests. The empty name means Default.
func FeatureSetOnly(name string) Features {
	return featureSetOnly(normalizeFeatureSet(name))
}

type featureSetOnly string

func (f featureSetOnly) FeatureSetName() string              { return string(f) }
func (featureSetOnly) Enabled(configv1.FeatureGateName) bool { return false }

// normalizeFeatureSet spells the API's empty feature set the way annotations do.
func normalizeFeatureSet(name string) string {
	if name == "" {
		return Default
	}
	return name
}
