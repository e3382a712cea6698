package controlplane

import (
	"context"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FeatureGateOption changes a FeatureGate that FeatureGate builds.
type FeatureGateOption func(*configv1.FeatureGate)

// FeatureGate is the one fixture every test, the bench and run-local build
// FeatureGates with: FeatureGate/cluster with the given feature set, changed
// by opts in order.
func FeatureGate(set configv1.FeatureSet, opts ...FeatureGateOption) *configv1.FeatureGate {
	fg := &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: "cluster"}}
	fg.Spec.FeatureSet = set
	for _, o := range opts {
		o(fg)
	}
	return fg
}

// Named names the FeatureGate: tests sharing a control plane keep apart by
// name.
func Named(name string) FeatureGateOption {
	return func(fg *configv1.FeatureGate) { fg.Name = name }
}

// CustomGates sets spec.customNoUpgrade.
func CustomGates(enabled, disabled []string) FeatureGateOption {
	return func(fg *configv1.FeatureGate) {
		fg.Spec.CustomNoUpgrade = &configv1.CustomFeatureGates{Enabled: GateNames(enabled...), Disabled: GateNames(disabled...)}
	}
}

// StatusGates adds a status.featureGates entry for version, as the
// cluster-config-operator publishes it; CreateFeatureGate writes it.
func StatusGates(version string, enabled, disabled []string) FeatureGateOption {
	return func(fg *configv1.FeatureGate) {
		fg.Status.FeatureGates = append(fg.Status.FeatureGates, GateDetails(version, enabled, disabled))
	}
}

// GateDetails is a status.featureGates entry. Its lists are never nil: the
// API server is sent [] rather than null.
func GateDetails(version string, enabled, disabled []string) configv1.FeatureGateDetails {
	return configv1.FeatureGateDetails{Version: version, Enabled: GateAttributes(enabled...), Disabled: GateAttributes(disabled...)}
}

// GateAttributes lists gates the way status.featureGates does.
func GateAttributes(names ...string) []configv1.FeatureGateAttributes {
	out := make([]configv1.FeatureGateAttributes, 0, len(names))
	for _, n := range names {
		out = append(out, configv1.FeatureGateAttributes{Name: configv1.FeatureGateName(n)})
	}
	return out
}

// GateNames lists gates the way spec.customNoUpgrade does.
func GateNames(names ...string) []configv1.FeatureGateName {
	out := make([]configv1.FeatureGateName, 0, len(names))
	for _, n := range names {
		out = append(out, configv1.FeatureGateName(n))
	}
	return out
}

// CreateFeatureGate creates fg and then, since the API server ignores status
// on create, writes its status through the status subresource. fg is left as
// the server returned it.
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
