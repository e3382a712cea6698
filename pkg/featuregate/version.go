package featuregate

import (
	"context"
	"fmt"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/client-go/rest"
)

// The guard reads the cluster's version when it is built with the
// placeholder version; an operator adopting it needs this rule too.
// +kubebuilder:rbac:groups=config.openshift.io,resources=clusterversions,verbs=get,resourceNames=version

// defaultVersionMarker is the version operators are built with until the
// release payload substitutes the real one (library-go's
// FeatureGateAccess knows it too).
const defaultVersionMarker = "0.0.1-snapshot"

// clusterVersionName is the cluster's one ClusterVersion.
const clusterVersionName = "version"

// releaseVersion is the version whose status.featureGates entry the guard
// reads, and where it came from: the Version option, or, when that is the
// placeholder, the ClusterVersion, read live with the FeatureGate's
// discipline (an error, never a guess).
type releaseVersion struct {
	version string
	from    string
}

// versionResolver reads the ClusterVersion when Options.Version is the
// marker; otherwise it answers with the option at once.
type versionResolver struct {
	option, marker string
	rc             *rest.RESTClient
}

func newVersionResolver(cfg *rest.Config, o Options) (*versionResolver, error) {
	r := &versionResolver{option: o.Version, marker: o.VersionMarker}
	if o.Version != o.VersionMarker {
		return r, nil
	}
	rc, err := configClient(cfg)
	if err != nil {
		return nil, err
	}
	r.rc = rc
	return r, nil
}

func (r *versionResolver) resolve(ctx context.Context) (releaseVersion, error) {
	if r.rc == nil {
		return releaseVersion{version: r.option, from: "option"}, nil
	}
	cv := &configv1.ClusterVersion{}
	if err := r.rc.Get().Resource("clusterversions").Name(clusterVersionName).MaxRetries(0).Do(ctx).Into(cv); err != nil {
		return releaseVersion{}, fmt.Errorf("version %s is a placeholder; get ClusterVersion %s: %w", r.marker, clusterVersionName, err)
	}
	return versionOf(cv, r.marker)
}

// versionOf is the cluster's release version as ReleaseVersion reads it,
// and where it came from.
func versionOf(cv *configv1.ClusterVersion, marker string) (releaseVersion, error) {
	if v := cv.Status.Desired.Version; v != "" {
		return releaseVersion{version: v, from: "ClusterVersion " + cv.Name + " status.desired.version"}, nil
	}
	if len(cv.Status.History) > 0 && cv.Status.History[0].Version != "" {
		return releaseVersion{version: cv.Status.History[0].Version, from: "ClusterVersion " + cv.Name + " status.history[0].version"}, nil
	}
	return releaseVersion{}, fmt.Errorf("version %s is a placeholder and ClusterVersion %s has no status.desired.version or status.history yet", marker, cv.Name)
}

// ReleaseVersion is the cluster's release version as library-go reads it
// for an operator built with the placeholder version (Options.VersionMarker):
// the desired version, else the newest history entry (history is newest
// first); an error when the ClusterVersion has neither yet. Tools that read
// a cluster, live or from a must-gather, resolve the placeholder with it as
// the guard does.
func ReleaseVersion(cv *configv1.ClusterVersion) (string, error) {
	v, err := versionOf(cv, defaultVersionMarker)
	return v.version, err
}

// versionNote is how the StartupSnapshot Event says which version it read.
func versionNote(s Snapshot, from string) string {
	if s.version == "" {
		return ""
	}
	return "; release version " + s.version + " from " + from
}
