package featuregatetest

import (
	"context"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FeatureGateOption changes a FeatureGate that FeatureGate builds.
type FeatureGateOption func(*configv1.FeatureGate)

// FeatureGate builds FeatureGate "cluster" with the feature set given,
// changed by opts in order: the object a test creates in envtest, gives a
// fake client, or writes to the file of Options.File.
func FeatureGate(set configv1.FeatureSet, opts ...FeatureGateOption) *configv1.FeatureGate {
	fg := &configv1.FeatureGate{
		TypeMeta:   metav1.TypeMeta{APIVersion: configv1.GroupVersion.String(), Kind: "FeatureGate"},
		ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
	}
	fg.Spec.FeatureSet = set
	for _, o := range opts {
		o(fg)
	}
	return fg
}

// Named names the FeatureGate: tests sharing an API server keep apart by
// name, and Options.Name tells the guard which to read.
func Named(name string) FeatureGateOption {
	return func(fg *configv1.FeatureGate) { fg.Name = name }
}

// CustomGates sets spec.customNoUpgrade.
func CustomGates(enabled, disabled []string) FeatureGateOption {
	return func(fg *configv1.FeatureGate) {
		fg.Spec.CustomNoUpgrade = &configv1.CustomFeatureGates{Enabled: names(enabled), Disabled: names(disabled)}
	}
}

// StatusGates adds the status.featureGates entry for version, as the
// cluster-config-operator publishes it: the gates the guard reads.
func StatusGates(version string, enabled, disabled []string) FeatureGateOption {
	return func(fg *configv1.FeatureGate) {
		fg.Status.FeatureGates = append(fg.Status.FeatureGates,
			configv1.FeatureGateDetails{Version: version, Enabled: attributes(enabled), Disabled: attributes(disabled)})
	}
}

// CreateFeatureGate creates fg and then, since an API server ignores status
// on create, writes its status through the status subresource. fg is left
// as the server returned it.
func CreateFeatureGate(ctx context.Context, c client.Client, fg *configv1.FeatureGate) error {
	st := fg.Status.DeepCopy()
	if err := c.Create(ctx, fg); err != nil {
		return fmt.Errorf("create FeatureGate %s: %w", fg.Name, err)
	}
	if len(st.FeatureGates) == 0 && len(st.Conditions) == 0 {
		return nil
	}
	fg.Status = *st
	if err := c.Status().Update(ctx, fg); err != nil {
		return fmt.Errorf("publish FeatureGate %s status: %w", fg.Name, err)
	}
	return nil
}

// attributes lists gates the way status.featureGates does; never nil, so
// that an API server is sent [] rather than null.
func attributes(gates []string) []configv1.FeatureGateAttributes {
	out := make([]configv1.FeatureGateAttributes, 0, len(gates))
	for _, g := range gates {
		out = append(out, configv1.FeatureGateAttributes{Name: configv1.FeatureGateName(g)})
	}
	return out
}

func names(gates []string) []configv1.FeatureGateName {
	out := make([]configv1.FeatureGateName, 0, len(gates))
	for _, g := range gates {
		out = append(out, configv1.FeatureGateName(g))
	}
	return out
}
