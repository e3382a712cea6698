// Package cluster reads a cluster's inclusion inputs the way the operator
// does (the FeatureGate as a snapshot, never assumed; the ClusterVersion's
// capabilities and overrides), live or from anything that stands for a
// cluster (a must-gather), for the commands that answer for a cluster:
// `manifests --from-cluster` and `audit`.
package cluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/controllers"
	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/manifest"
)

// Parse parses the flags of a command that takes no arguments. ok is false
// when the command is to end with exit: 0 when --help was asked for (help
// is not bad input), 2 on a bad flag (the flag package has said why) or an
// argument, said on fs's output as "<command>: unexpected arguments".
func Parse(fs *flag.FlagSet, args []string) (exit int, ok bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "%s: unexpected arguments %q\n", fs.Name(), fs.Args())
		return 2, false
	}
	return 0, true
}

// FilterFlags are the inclusion inputs that neither the FeatureGate nor the
// ClusterVersion holds, bound alike by `manifests` and `audit`.
type FilterFlags struct {
	ReleaseVersion, Profile, ExcludeID *string
}

// BindFilterFlags binds --release-version, --cluster-profile and
// --exclude-identifier to fs.
func BindFilterFlags(fs *flag.FlagSet) FilterFlags {
	return FilterFlags{
		ReleaseVersion: fs.String("release-version", "", "Release version, e.g. 4.22.0: selects the FeatureGate status entry and the major version for release.openshift.io/major-version."),
		Profile:        fs.String("cluster-profile", "", "Cluster profile (include.release.openshift.io/<profile>)."),
		ExcludeID:      fs.String("exclude-identifier", "", "Exclude manifests annotated exclude.release.openshift.io/<identifier>: \"true\"."),
	}
}

// Cluster is the Cluster the flags describe: profile, exclude identifier
// and the release's major version; no features, no capabilities. The
// placeholder version has no major version: WithVersion sets it once the
// cluster's version is read.
func (f FilterFlags) Cluster() (manifest.Cluster, error) {
	c := manifest.Cluster{Profile: *f.Profile, ExcludeIdentifier: *f.ExcludeID}
	if Placeholder(*f.ReleaseVersion) {
		return c, nil
	}
	return c, WithVersion(&c, *f.ReleaseVersion)
}

// Placeholder says whether version is the one operators are built with
// (featuregate.Options.VersionMarker): it stands for the cluster's version.
func Placeholder(version string) bool { return version == featuregate.Defaults().VersionMarker }

// WithVersion sets c's major version from the release version, when there
// is one.
func WithVersion(c *manifest.Cluster, version string) error {
	if version == "" {
		return nil
	}
	major, err := manifest.MajorVersion(version)
	if err != nil {
		return fmt.Errorf("--release-version: %w", err)
	}
	c.MajorVersion = &major
	return nil
}

// Read reads what the operator reads at start and before each run:
// the FeatureGate, as a snapshot for releaseVersion (never assumed: an
// error when it cannot be read), and the ClusterVersion's inputs.
func Read(kubeconfig, featureGateName, releaseVersion string) (featuregate.Snapshot, controllers.Inputs, error) {
	c, err := Client(kubeconfig)
	if err != nil {
		return featuregate.Snapshot{}, controllers.Inputs{}, fmt.Errorf("--from-cluster: %w", err)
	}
	return ReadFrom(c, "--from-cluster", featureGateName, releaseVersion)
}

// Client is a client for kubeconfig (empty: $KUBECONFIG,
// ~/.kube/config or in-cluster): config.openshift.io/v1 typed, any other
// kind unstructured, mapped by discovery.
func Client(kubeconfig string) (client.Client, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	if cfg.QPS == 0 { // `audit` GETs every object of a payload, not 5 a second
		cfg.QPS, cfg.Burst = 50, 100
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(configv1.Install(scheme))
	return client.New(cfg, client.Options{Scheme: scheme})
}

// ReadFrom is Read through reader, a cluster or what stands
// for one; source prefixes the errors. A placeholder releaseVersion
// (featuregate.Options.VersionMarker) is the ClusterVersion's version, as
// the operator resolves it; the snapshot's Version says which was read.
func ReadFrom(reader client.Reader, source, featureGateName, releaseVersion string) (featuregate.Snapshot, controllers.Inputs, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if Placeholder(releaseVersion) {
		cv := &configv1.ClusterVersion{}
		if err := reader.Get(ctx, client.ObjectKey{Name: "version"}, cv); err != nil {
			return featuregate.Snapshot{}, controllers.Inputs{}, fmt.Errorf("%s: --release-version %s is a placeholder; ClusterVersion version not read: %w", source, releaseVersion, err)
		}
		v, err := featuregate.ReleaseVersion(cv)
		if err != nil {
			return featuregate.Snapshot{}, controllers.Inputs{}, fmt.Errorf("%s: %w", source, err)
		}
		releaseVersion = v
	}
	fg := &configv1.FeatureGate{}
	if err := reader.Get(ctx, client.ObjectKey{Name: featureGateName}, fg); err != nil {
		return featuregate.Snapshot{}, controllers.Inputs{}, fmt.Errorf("%s: FeatureGate %s not read; no feature set assumed: %w", source, featureGateName, err)
	}
	// Read as the operator reads it: without the release version's entry
	// the operator is not ready, and the gates would be a guess.
	snap, err := featuregate.Read(fg, releaseVersion)
	if err != nil {
		return featuregate.Snapshot{}, controllers.Inputs{}, fmt.Errorf("%s: initial FeatureGate not read yet: %w", source, err)
	}
	inputs, err := controllers.ReadInputs(ctx, reader, "")
	if err != nil {
		return featuregate.Snapshot{}, controllers.Inputs{}, fmt.Errorf("%s: %w", source, err)
	}
	return snap, inputs, nil
}
