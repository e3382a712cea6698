// Package manifests is the `manager manifests` command: which manifests of
// a payload directory a cluster gets, and why, without a cluster or
// against one; and the RBAC that applying them needs.
package manifests

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/featuregate-operator/operator/internal/clusterinputs"
	"github.com/featuregate-operator/operator/internal/cmd/cmdline"
	"github.com/featuregate-operator/operator/internal/objectfile"
	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/manifest"
)

// Run prints, without a cluster, which manifests of a directory
// a cluster gets and why: with --feature-gate the gates of a FeatureGate
// file, otherwise each feature set with no gate enabled. It exits 1 when a
// manifest cannot be read or two kept manifests define one object, 2 on bad
// flags or input files.
func Run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("manifests", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("manifests-dir", "", "Directory of release manifests (required).")
	featureSet := fs.String("feature-set", "", "Only these feature sets, comma separated (default: every known one), each with no gate enabled. Not with --feature-gate.")
	featureGate := fs.String("feature-gate", "", "FeatureGate YAML or JSON file (like openshift/api payload-manifests/featuregates/*.yaml): its feature set and the enabled gates of its status entry for --release-version (the first entry without it).")
	filters := cmdline.BindFilterFlags(fs)
	releaseVersion := filters.ReleaseVersion
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
	if exit, ok := cmdline.Parse(fs, args); !ok {
		return exit
	}
	fail := func(err error) int {
		fmt.Fprintln(stderr, "manifests:", err)
		return 2
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

	if clusterinputs.IsVersionMarker(*releaseVersion) && !*fromCluster {
		return fail(fmt.Errorf("--release-version %s is the version marker, resolved only from a cluster's ClusterVersion: use --from-cluster, or give the release's version", *releaseVersion))
	}
	target, err := filters.Cluster()
	if err != nil {
		return fail(err)
	}
	report := Report{Cluster: target}
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
		c, err := cmdline.Client(*kubeconfig)
		if err != nil {
			return fail(fmt.Errorf("--from-cluster: %w", err))
		}
		features, inputs, err := cmdline.ReadCluster(c, "--from-cluster", *featureGateName, *releaseVersion)
		if err != nil {
			return fail(err)
		}
		if err := cmdline.SetMajorVersion(&report.Cluster, features.Version()); err != nil {
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
	if err := WriteReport(stdout, report, *output); err != nil {
		return fail(err)
	}
	if HasErrors(report) {
		return 1
	}
	return 0
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
	if err := objectfile.Decode(data, configv1.GroupVersion.WithKind(kind), obj, true); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// readFeatureGateFile reads the features of a FeatureGate file for releaseVersion,
// the way the operator reads the live one. Without a release version, the file's one
// status entry is used. A payload's FeatureGate files are templates whose
// one status entry has an empty version (filled in when the release is
// built): without an entry for releaseVersion, such an entry stands for it, and a
// note says so.
func readFeatureGateFile(path, releaseVersion string, stderr io.Writer) (manifest.Features, error) {
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
	case releaseVersion == "" && len(entries) == 1:
		releaseVersion = entries[0].Version
	case releaseVersion != "" && !has(releaseVersion) && has(""):
		fg = fg.DeepCopy()
		for i := range fg.Status.FeatureGates {
			if fg.Status.FeatureGates[i].Version == "" {
				fg.Status.FeatureGates[i].Version = releaseVersion
			}
		}
		fmt.Fprintf(stderr, "manifests: %s has no status.featureGates entry for %s; using its entry with an empty version (a payload template)\n", path, releaseVersion)
	}
	if releaseVersion == "" {
		// An entry with an empty version is read like any other.
		fg = fg.DeepCopy()
		releaseVersion = "template"
		fg.Status.FeatureGates[0].Version = releaseVersion
	}
	snap, err := featuregate.Read(fg, releaseVersion)
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
	in := clusterinputs.FromClusterVersion(cv)
	return in.Capabilities, in.Overrides, nil
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

// orNone is v, or "none" when empty.
func orNone(v string) string {
	if v == "" {
		return "none"
	}
	return v
}
