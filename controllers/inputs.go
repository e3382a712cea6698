package controllers

import (
	"context"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/manifest"
)

// DefaultClusterVersionName is the ClusterVersion of an OpenShift cluster.
const DefaultClusterVersionName = "version"

// +kubebuilder:rbac:groups=config.openshift.io,resources=clusterversions,verbs=get,resourceNames=version

// Inputs are the inclusion inputs the cluster holds outside the FeatureGate:
// the ClusterVersion's capabilities and overrides. They are read live at
// the start of every run, never guessed: capabilities can be enabled at any
// time (never disabled), and a newly enabled one is applied by the next run
// without a restart, unlike a feature set change, which restarts.
type Inputs struct {
	// Capabilities are nil when the filter is off; Off says why.
	Capabilities *manifest.Capabilities
	Overrides    []configv1.ComponentOverride
	Off          string
}

// Filter says, for the log and the ClusterOperator, what the capability
// filter does.
func (in Inputs) Filter() string {
	if in.Capabilities == nil {
		return "off: " + in.Off
	}
	return fmt.Sprintf("on: %d of %d known capabilities enabled", len(in.Capabilities.Enabled), len(in.Capabilities.Known))
}

// Cluster is what Include decides with, on snap.
func (in Inputs) Cluster(snap featuregate.Snapshot, profile, excludeIdentifier, releaseVersion string) manifest.Cluster {
	c := manifest.Cluster{
		Features:          snap,
		Profile:           profile,
		ExcludeIdentifier: excludeIdentifier,
		Capabilities:      in.Capabilities,
		Overrides:         in.Overrides,
	}
	if major, err := manifest.MajorVersion(releaseVersion); err == nil {
		c.MajorVersion = &major
	}
	return c
}

// readInputs reads the ClusterVersion. Not served at all (no ClusterVersion
// CRD, as on a cluster that is not OpenShift) or absent turns the capability
// filter off and says so; any other failure is an error, and the run
// applies nothing rather than guess.
func (a *Applier) readInputs(ctx context.Context) (Inputs, error) {
	return ReadInputs(ctx, a.Reader, a.ClusterVersionName)
}

// ReadInputs reads the ClusterVersion name (empty: "version") through
// reader, as the Applier does before each run.
func ReadInputs(ctx context.Context, reader client.Reader, name string) (Inputs, error) {
	if name == "" {
		name = DefaultClusterVersionName
	}
	cv := &configv1.ClusterVersion{}
	err := reader.Get(ctx, client.ObjectKey{Name: name}, cv)
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err) && !isObjectNotFound(err):
		return Inputs{Off: "ClusterVersion is not served"}, nil
	case apierrors.IsNotFound(err):
		return Inputs{Off: fmt.Sprintf("ClusterVersion %s does not exist", name)}, nil
	case err != nil:
		return Inputs{}, fmt.Errorf("ClusterVersion %s not read; nothing applied: %w", name, err)
	}
	capabilities, overrides := manifest.ClusterVersionInputs(cv)
	in := Inputs{Capabilities: capabilities, Overrides: overrides}
	if capabilities == nil {
		in.Off = fmt.Sprintf("ClusterVersion %s has no status.capabilities yet", name)
	}
	return in, nil
}

// isObjectNotFound tells a missing object (details name it) from a
// resource the server does not serve.
func isObjectNotFound(err error) bool {
	status, ok := err.(apierrors.APIStatus)
	return ok && status.Status().Details != nil && status.Status().Details.Name != ""
}
