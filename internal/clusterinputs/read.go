package clusterinputs

import (
	"context"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// Read reads the ClusterVersion through reader. Not served at all (no
// ClusterVersion CRD, as on a cluster that is not OpenShift) or absent
// turns the capability filter off and says so; any other failure is an
// error, and the caller decides nothing rather than guess.
func Read(ctx context.Context, reader client.Reader) (Inputs, error) {
	cv := &configv1.ClusterVersion{}
	err := reader.Get(ctx, client.ObjectKey{Name: ClusterVersionName}, cv)
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err) && !isObjectNotFound(err):
		return Inputs{Off: "ClusterVersion is not served"}, nil
	case apierrors.IsNotFound(err):
		return Inputs{Off: fmt.Sprintf("ClusterVersion %s does not exist", ClusterVersionName)}, nil
	case err != nil:
		return Inputs{}, fmt.Errorf("ClusterVersion %s not read; nothing applied: %w", ClusterVersionName, err)
	}
	return FromClusterVersion(cv), nil
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

// isObjectNotFound tells a missing object (details name it) from a
// resource the server does not serve.
func isObjectNotFound(err error) bool {
	status, ok := err.(apierrors.APIStatus)
	return ok && status.Status().Details != nil && status.Status().Details.Name != ""
}
