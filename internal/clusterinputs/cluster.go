package clusterinputs

import (
	"context"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/manifest"
)

// Cluster is what inclusion decides with: features (a snapshot), these
// inputs, and the cluster profile and exclude identifier, which the
// caller's configuration holds. The major-version filter is on when
// releaseVersion has a numeric major version, and off otherwise: the
// snapshot's version is one the guard accepted, and inclusion does not
// refuse it (the commands, which take it from a flag, call
// SetMajorVersion and say what is wrong with it).
func (in Inputs) Cluster(features manifest.Features, profile, excludeIdentifier, releaseVersion string) manifest.Cluster {
	c := manifest.Cluster{
		Features:          features,
		Profile:           profile,
		ExcludeIdentifier: excludeIdentifier,
		Capabilities:      in.Capabilities,
		Overrides:         in.Overrides,
	}
	_ = SetMajorVersion(&c, releaseVersion) // not a number: the filter stays off, as said above
	return c
}

// ReadWithFeatures reads through reader what the operator reads at start
// and before each run: the FeatureGate featureGateName as a snapshot for
// releaseVersion (the version marker resolved from the ClusterVersion;
// never assumed: without the version's status entry the operator is not
// ready, and the gates would be a guess), and the inputs. The snapshot's
// Version says which release version was read.
func ReadWithFeatures(ctx context.Context, reader client.Reader, featureGateName, releaseVersion string) (featuregate.Snapshot, Inputs, error) {
	resolved, err := ResolveReleaseVersion(ctx, reader, releaseVersion)
	if err != nil {
		return featuregate.Snapshot{}, Inputs{}, err
	}
	fg := &configv1.FeatureGate{}
	if err := reader.Get(ctx, client.ObjectKey{Name: featureGateName}, fg); err != nil {
		return featuregate.Snapshot{}, Inputs{}, fmt.Errorf("FeatureGate %s not read; no feature set assumed: %w", featureGateName, err)
	}
	snap, err := featuregate.Read(fg, resolved)
	if err != nil {
		return featuregate.Snapshot{}, Inputs{}, fmt.Errorf("initial FeatureGate not read yet: %w", err)
	}
	inputs, err := Read(ctx, reader)
	if err != nil {
		return featuregate.Snapshot{}, Inputs{}, err
	}
	return snap, inputs, nil
}
