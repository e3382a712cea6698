// Package cmdline is what the commands that answer for a cluster,
// `manifests` and `audit`, share of their command lines: the parsing, the
// inclusion inputs that only flags give, and the cluster they read, live
// or a must-gather, through clusterinputs as the operator reads it. It
// holds the flag names, so that the errors name the flag to fix.
package cmdline

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

	"github.com/featuregate-operator/operator/internal/clusterinputs"
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
		ReleaseVersion: fs.String("release-version", "", "Release version, e.g. 4.22.0: selects the FeatureGate status entry and the major version for release.openshift.io/major-version. The version marker "+featuregate.Defaults().VersionMarker+" means the cluster's own (read from its ClusterVersion)."),
		Profile:        fs.String("cluster-profile", "", "Cluster profile (include.release.openshift.io/<profile>)."),
		ExcludeID:      fs.String("exclude-identifier", "", "Exclude manifests annotated exclude.release.openshift.io/<identifier>: \"true\"."),
	}
}

// Cluster is the Cluster the flags describe: profile, exclude identifier
// and the release's major version; no features, no capabilities. The
// version marker has no major version: SetMajorVersion sets it once the
// cluster's release version is read.
func (f FilterFlags) Cluster() (manifest.Cluster, error) {
	c := manifest.Cluster{Profile: *f.Profile, ExcludeIdentifier: *f.ExcludeID}
	if clusterinputs.IsVersionMarker(*f.ReleaseVersion) {
		return c, nil
	}
	return c, SetMajorVersion(&c, *f.ReleaseVersion)
}

// SetMajorVersion is clusterinputs.SetMajorVersion, its error naming the
// flag the release version comes from (or stands for).
func SetMajorVersion(c *manifest.Cluster, releaseVersion string) error {
	if err := clusterinputs.SetMajorVersion(c, releaseVersion); err != nil {
		return fmt.Errorf("--release-version: %w", err)
	}
	return nil
}

// readTimeout bounds reading a cluster: a command answers, or says why not.
const readTimeout = 30 * time.Second

// ReadCluster reads through reader what the operator reads of a cluster
// (clusterinputs.ReadWithFeatures); source, the flag that says where the
// cluster is read, prefixes the errors.
func ReadCluster(reader client.Reader, source, featureGateName, releaseVersion string) (featuregate.Snapshot, clusterinputs.Inputs, error) {
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	snap, inputs, err := clusterinputs.ReadWithFeatures(ctx, reader, featureGateName, releaseVersion)
	if err != nil {
		return featuregate.Snapshot{}, clusterinputs.Inputs{}, fmt.Errorf("%s: %w", source, err)
	}
	return snap, inputs, nil
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
