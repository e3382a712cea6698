package manifest

import (
	"slices"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Features is what inclusion needs to know of the cluster's feature configuration.
type Features interface {
	// FeatureSetName is the feature set, with the empty set spelled "Default".
	FeatureSetName() string
	// Enabled reports whether a gate is enabled for our version; unknown
	// gates are not enabled. The typed name lets the constants of
	// github.com/openshift/api/features be passed as they are.
	Enabled(gate configv1.FeatureGateName) bool
}

// Feature set names as they are spelled in manifest annotations, as
// constants (openshift/api declares them as variables). The API's empty
// feature set is spelled "Default" here, as in library-go.
const (
	defaultSet     = "Default"
	techPreviewSet = "TechPreviewNoUpgrade"
	devPreviewSet  = "DevPreviewNoUpgrade"
	customSet      = "CustomNoUpgrade"
	okdSet         = "OKD"
)

// knownFeatureSets are the feature sets of the pinned openshift/api (every
// fixed one, then CustomNoUpgrade, which has no fixed gate list), in the
// order reports show them. library-go derives the same set from the same
// module, so a feature set added there is known here with the next bump.
var knownFeatureSets = func() []string {
	var names []string
	for _, s := range configv1.AllFixedFeatureSets {
		names = append(names, normalizeFeatureSet(string(s)))
	}
	if !slices.Contains(names, customSet) {
		names = append(names, customSet)
	}
	return names
}()

// KnownFeatureSets returns the feature set names annotations may use, in
// report order. The caller may modify the returned slice.
func KnownFeatureSets() []string {
	return slices.Clone(knownFeatureSets)
}

func isKnownFeatureSet(name string) bool {
	return slices.Contains(knownFeatureSets, name)
}

// NewFeatures returns Features with feature set featureSet (empty: Default)
// and exactly the gates enabled listed; with none listed it serves offline
// evaluation, where there is no cluster to ask about gates.
func NewFeatures(featureSet string, enabled ...configv1.FeatureGateName) Features {
	return staticFeatures{set: normalizeFeatureSet(featureSet), enabled: sets.New(enabled...)}
}

type staticFeatures struct {
	set     string
	enabled sets.Set[configv1.FeatureGateName]
}

func (f staticFeatures) FeatureSetName() string { return f.set }
func (f staticFeatures) Enabled(gate configv1.FeatureGateName) bool {
	return f.enabled.Has(gate)
}

// normalizeFeatureSet spells the API's empty feature set the way annotations do.
func normalizeFeatureSet(name string) string {
	if name == "" {
		return defaultSet
	}
	return name
}
