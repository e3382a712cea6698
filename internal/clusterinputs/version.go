package clusterinputs

import (
	"context"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/manifest"
)

// The release version is the version of the payload an operator belongs
// to (featuregate.Options.Version, the operator's --release-version): it
// selects the FeatureGate's status entry and gives the major version.
// Until the payload substitutes it, an operator is built with the version
// marker (featuregate.Options.VersionMarker), which stands for the
// cluster's own release version.

// IsVersionMarker says whether releaseVersion is the guard's default
// version marker: then the cluster's own version is meant.
func IsVersionMarker(releaseVersion string) bool {
	return releaseVersion == featuregate.Defaults().VersionMarker
}

// ResolveReleaseVersion is releaseVersion, or, when it is the version
// marker, the ClusterVersion's, read through reader as the guard reads it.
func ResolveReleaseVersion(ctx context.Context, reader client.Reader, releaseVersion string) (string, error) {
	if !IsVersionMarker(releaseVersion) {
		return releaseVersion, nil
	}
	cv := &configv1.ClusterVersion{}
	if err := reader.Get(ctx, client.ObjectKey{Name: ClusterVersionName}, cv); err != nil {
		return "", fmt.Errorf("release version %s is the version marker; ClusterVersion %s not read: %w", releaseVersion, ClusterVersionName, err)
	}
	return featuregate.ReleaseVersion(cv)
}

// SetMajorVersion turns c's major-version filter on with the major
// version of releaseVersion; an empty one leaves the filter off.
func SetMajorVersion(c *manifest.Cluster, releaseVersion string) error {
	if releaseVersion == "" {
		return nil
	}
	major, err := manifest.MajorVersion(releaseVersion)
	if err != nil {
		return err
	}
	c.MajorVersion = &major
	return nil
}
