package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/featuregate-operator/operator/controllers"
	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/manifest"
)

// manifestsCommand prints, without a cluster, which manifests of a directory
// a cluster gets and why: with --feature-gate the gates of a FeatureGate
// file, otherwise each feature set with no gate enabled. It exits 1 when a
// manifest cannot be read or two kept manifests define one object, 2 on bad
// flags or input files.
func manifestsCommand(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("manifests", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("manifests-dir", "", "Directory of release manifests (required).")
	featureSet := fs.String("feature-set", "", "Only these feature sets, comma separated (default: every known one), each with no gate enabled. Not with --feature-gate.")
	featureGate := fs.String("feature-gate", "", "FeatureGate YAML or JSON file (like openshift/api payload-manifests/featuregates/*.yaml): its feature set and the enabled gates of its status entry for --release-version (the first entry without it).")
	filters := bindFilterFlags(fs)
	releaseVersion := filters.releaseVersion
	capabilities := fs.String("capabilities", "", "Enabled capabilities, comma separated (empty: none), against the capabilities openshift/api knows. Not with --cluster-version.")
	clusterVersion := fs.String("cluster-version", "", "ClusterVersion YAML or JSON file: its status.capabilities and spec.overrides.")
	fromCluster := fs.Bool("from-cluster", false, "Read the live FeatureGate and ClusterVersion the way the operator does (kubeconfig: --kubeconfig, $KUBECONFIG, ~/.kube/config or in-cluster). Not with --feature-gate, --feature-set, --capabilities or --cluster-version.")
	kubeconfig := fs.String("kubeconfig", "", "With --from-cluster: the kubeconfig file.")
	featureGateName := fs.String("feature-gate-name", featuregate.Defaults().Name, "With --from-cluster: the FeatureGate to read.")
	output := fs.String("o", "table", "Output format: table or json.")
	rbac := fs.Bool("rbac", false, "Print, as YAML, the least-privilege RBAC that applying every manifest of the directory needs (whatever the feature set), instead of the decisions.")
	rbacName := fs.String("rbac-name", "manager-payload-role", "With --rbac: the name of the roles and bindings.")
	rbacSubject := fs.String("rbac-service-account", "controller-manager", "With --rbac: the operator's ServiceAccount (its namespace is left for kustomize to set).")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: manager manifests --manifests-dir DIR [--feature-gate FILE | --feature-set X,Y] [--release-version V]\n"+
			"         [--cluster-profile P] [--capabilities A,B | --cluster-version FILE] [--exclude-identifier ID] [-o table|json]\n"+
			"       manager manifests --manifests-dir DIR --from-cluster [--kubeconfig FILE] [--release-version V] [...]\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0 // asked for: not bad input
		}
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "manifests:", err)
		return 2
	}
	if fs.NArg() > 0 {
		return fail(fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if *dir == "" {
		return fail(errors.New("--manifests-dir is required"))
	}
	if *featureGate != "" && *featureSet != "" {
		return fail(errors.New("--feature-set and --feature-gate exclude each other: the FeatureGate names its feature set"))
	}
	if *capabilities != "" && *clusterVersion != "" {
		return fail(errors.New("--capabilities and --cluster-version exclude each other: the ClusterVersion has its capabilities"))
	}

	capabilitiesSet := false
	fs.Visit(func(f *flag.Flag) { capabilitiesSet = capabilitiesSet || f.Name == "capabilities" })
	if *fromCluster && (*featureGate != "" || *featureSet != "" || capabilitiesSet || *clusterVersion != "") {
		return fail(errors.New("--from-cluster reads the FeatureGate and ClusterVersion: not with --feature-gate, --feature-set, --capabilities or --cluster-version"))
	}

	if placeholder(*releaseVersion) && !*fromCluster {
		return fail(fmt.Errorf("--release-version %s is a placeholder, resolved only from a cluster's ClusterVersion: use --from-cluster, or give the release's version", *releaseVersion))
	}
	cluster, err := filters.cluster()
	if err != nil {
		return fail(err)
	}
	report := manifest.Report{Cluster: cluster}
	if *featureSet != "" {
		report.FeatureSets = strings.Split(*featureSet, ",")
	}
	if *featureGate != "" {
		f, err := readFeatureGateFile(*featureGate, *releaseVersion, stderr)
		if err != nil {
			return fail(err)
		}
		report.Cluster.Features = f
	}
	if *fromCluster {
		features, inputs, err := readCluster(*kubeconfig, *featureGateName, *releaseVersion)
		if err != nil {
			return fail(err)
		}
		if err := withVersion(&report.Cluster, features.Version()); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stderr, "manifests: FeatureGate %s: feature set %s, release version %s; capability filter %s\n", *featureGateName, features.FeatureSetName(), orNone(features.Version()), inputs.Filter())
		report.Cluster.Features, report.Cluster.Capabilities, report.Cluster.Overrides = features, inputs.Capabilities, inputs.Overrides
	}
	if capabilitiesSet {
		c, err := parseCapabilities(*capabilities)
		if err != nil {
			return fail(err)
		}
		report.Cluster.Capabilities = c
	}
	if *clusterVersion != "" {
		c, overrides, err := readClusterVersionFile(*clusterVersion)
		if err != nil {
			return fail(err)
		}
		if c == nil {
			fmt.Fprintf(stderr, "manifests: %s has no status.capabilities.knownCapabilities: capability filter off\n", *clusterVersion)
		}
		report.Cluster.Capabilities = c
		report.Cluster.Overrides = overrides
	}

	report.Manifests, report.LoadErrors = manifest.Load(*dir)
	if *rbac {
		return writeRBAC(stdout, stderr, manifest.RBACFor(report.Manifests, *rbacName, *rbacSubject), report.LoadErrors)
	}
	if err := manifest.WriteReport(stdout, report, *output); err != nil {
		return fail(err)
	}
	if manifest.HasErrors(report) {
		return 1
	}
	return 0
}

// filterFlags are the inclusion inputs that neither the FeatureGate nor the
// ClusterVersion holds, bound alike by `manifests` and `audit`.
type filterFlags struct {
	releaseVersion, profile, excludeID *string
}

func bindFilterFlags(fs *flag.FlagSet) filterFlags {
	return filterFlags{
		releaseVersion: fs.String("release-version", "", "Release version, e.g. 4.22.0: selects the FeatureGate status entry and the major version for release.openshift.io/major-version."),
		profile:        fs.String("cluster-profile", "", "Cluster profile (include.release.openshift.io/<profile>)."),
		excludeID:      fs.String("exclude-identifier", "", "Exclude manifests annotated exclude.release.openshift.io/<identifier>: \"true\"."),
	}
}

// cluster is the Cluster the flags describe: profile, exclude identifier
// and the release's major version; no features, no capabilities. The
// placeholder version has no major version: withVersion sets it once the
// cluster's version is read.
func (f filterFlags) cluster() (manifest.Cluster, error) {
	c := manifest.Cluster{Profile: *f.profile, ExcludeIdentifier: *f.excludeID}
	if placeholder(*f.releaseVersion) {
		return c, nil
	}
	return c, withVersion(&c, *f.releaseVersion)
}

// placeholder says whether version is the one operators are built with
// (featuregate.Options.VersionMarker): it stands for the cluster's version.
func placeholder(version string) bool { return version == featuregate.Defaults().VersionMarker }

// orNone is v, or "none" when empty.
func orNone(v string) string {
	if v == "" {
		return "none"
	}
	return v
}

// withVersion sets c's major version from the release version, when there
// is one.
func withVersion(c *manifest.Cluster, version string) error {
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

// readCluster reads what the operator reads at start and before each run:
// the FeatureGate, as a snapshot for releaseVersion (never assumed: an
// error when it cannot be read), and the ClusterVersion's inputs.
func readCluster(kubeconfig, featureGateName, releaseVersion string) (featuregate.Snapshot, controllers.Inputs, error) {
	c, err := clusterClient(kubeconfig)
	if err != nil {
		return featuregate.Snapshot{}, controllers.Inputs{}, fmt.Errorf("--from-cluster: %w", err)
	}
	return readClusterFrom(c, "--from-cluster", featureGateName, releaseVersion)
}

// clusterClient is a client for kubeconfig (empty: $KUBECONFIG,
// ~/.kube/config or in-cluster): config.openshift.io/v1 typed, any other
// kind unstructured, mapped by discovery.
func clusterClient(kubeconfig string) (client.Client, error) {
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

// readClusterFrom is readCluster through reader, a cluster or what stands
// for one; source prefixes the errors. A placeholder releaseVersion
// (featuregate.Options.VersionMarker) is the ClusterVersion's version, as
// the operator resolves it; the snapshot's Version says which was read.
func readClusterFrom(reader client.Reader, source, featureGateName, releaseVersion string) (featuregate.Snapshot, controllers.Inputs, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if placeholder(releaseVersion) {
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

// readObjectFile decodes a YAML or JSON file strictly into obj and checks
// its kind, so that a misspelt field or the wrong file is an error naming it.
func readObjectFile(path, kind string, obj interface{}) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return decodeObject(path, data, kind, obj)
}

// decodeObject is readObjectFile for data read from path.
func decodeObject(path string, data []byte, kind string, obj interface{}) error {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if meta.Kind != kind || meta.APIVersion != configv1.GroupVersion.String() {
		return fmt.Errorf("%s: apiVersion %q kind %q, want %s %s", path, meta.APIVersion, meta.Kind, configv1.GroupVersion, kind)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// readFeatureGateFile reads the features of a FeatureGate file for version,
// the way the operator reads the live one. Without a version, the file's one
// status entry is used. A payload's FeatureGate files are templates whose
// one status entry has an empty version (filled in when the release is
// built): without an entry for version, such an entry stands for it, and a
// note says so.
func readFeatureGateFile(path, version string, stderr io.Writer) (manifest.Features, error) {
	fg := &configv1.FeatureGate{}
	if err := readObjectFile(path, "FeatureGate", fg); err != nil {
		return nil, fmt.Errorf("--feature-gate %w", err)
	}
	entries := fg.Status.FeatureGates
	if len(entries) == 0 {
		return nil, fmt.Errorf("--feature-gate %s: no status.featureGates entry: its gates would be a guess", path)
	}
	has := func(v string) bool {
		return slices.ContainsFunc(entries, func(d configv1.FeatureGateDetails) bool { return d.Version == v })
	}
	switch {
	case version == "" && len(entries) == 1:
		version = entries[0].Version
	case version != "" && !has(version) && has(""):
		fg = fg.DeepCopy()
		for i := range fg.Status.FeatureGates {
			if fg.Status.FeatureGates[i].Version == "" {
				fg.Status.FeatureGates[i].Version = version
			}
		}
		fmt.Fprintf(stderr, "manifests: %s has no status.featureGates entry for %s; using its entry with an empty version (a payload template)\n", path, version)
	}
	if version == "" {
		// An entry with an empty version is read like any other.
		fg = fg.DeepCopy()
		version = "template"
		fg.Status.FeatureGates[0].Version = version
	}
	snap, err := featuregate.Read(fg, version)
	if err != nil {
		return nil, fmt.Errorf("--feature-gate %s: %w", path, err)
	}
	if name := snap.FeatureSetName(); !slices.Contains(manifest.KnownFeatureSets(), name) {
		return nil, fmt.Errorf("--feature-gate %s: spec.featureSet %q is not a known feature set (known: %s)", path, name, strings.Join(manifest.KnownFeatureSets(), ", "))
	}
	return snap, nil
}

// readClusterVersionFile returns the capabilities of a ClusterVersion file
// (nil when its status knows none) and its overrides.
func readClusterVersionFile(path string) (*manifest.Capabilities, []configv1.ComponentOverride, error) {
	cv := &configv1.ClusterVersion{}
	if err := readObjectFile(path, "ClusterVersion", cv); err != nil {
		return nil, nil, fmt.Errorf("--cluster-version %w", err)
	}
	for i, o := range cv.Spec.Overrides {
		if o.Kind == "" || o.Name == "" {
			return nil, nil, fmt.Errorf("--cluster-version %s: spec.overrides[%d] needs kind and name", path, i)
		}
	}
	c, overrides := manifest.ClusterVersionInputs(cv)
	return c, overrides, nil
}

// parseCapabilities takes a list of enabled capabilities; the known ones are
// openshift/api's, and an unknown name is an error rather than a silent
// exclusion.
func parseCapabilities(list string) (*manifest.Capabilities, error) {
	known := manifest.KnownCapabilities()
	c := &manifest.Capabilities{Known: known, Enabled: []configv1.ClusterVersionCapability{}}
	if strings.TrimSpace(list) == "" { // --capabilities= : none enabled
		return c, nil
	}
	for _, name := range strings.Split(list, ",") {
		capability := configv1.ClusterVersionCapability(strings.TrimSpace(name))
		if !slices.Contains(known, capability) {
			var names []string
			for _, k := range known {
				names = append(names, string(k))
			}
			return nil, fmt.Errorf("--capabilities: unknown capability %q (known: %s)", capability, strings.Join(names, ", "))
		}
		c.Enabled = append(c.Enabled, capability)
	}
	return c, nil
}

// writeRBAC prints the payload's RBAC as a YAML stream; a manifest that
// could not be read has no rule, so the command fails naming it.
func writeRBAC(stdout, stderr io.Writer, r manifest.RBAC, loadErrs []error) int {
	for _, err := range loadErrs {
		fmt.Fprintln(stderr, "manifests:", err)
	}
	fmt.Fprintln(stdout, "# Generated by `manager manifests --rbac`; regenerate with `make manifests`.")
	for i, obj := range r.Objects() {
		data, err := yaml.Marshal(obj)
		if err != nil {
			fmt.Fprintln(stderr, "manifests:", err)
			return 2
		}
		if i > 0 {
			fmt.Fprintln(stdout, "---")
		}
		stdout.Write(data) //nolint:errcheck // a failed write to stdout shows there
	}
	if len(loadErrs) > 0 {
		return 1
	}
	return 0
}
