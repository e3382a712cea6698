package audit

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// The fixture tells bug 2053359: a TechPreviewNoUpgrade cluster whose
// must-gather has no openshift-cluster-api namespace, because the
// cluster-version-operator read the FeatureGate while the API refused
// connections and went on as if it were Default.
var (
	seedPayload    = filepath.Join("testdata", "mustgather", "payload")
	seedMustGather = filepath.Join("testdata", "mustgather", "must-gather.local.2053359")
)

const (
	seedVersion  = "4.10.0-rc.1"
	seedImageDir = "quay-io-openshift-release-dev-ocp-v4-0-art-dev-sha256-90979cdd2bba6c5a63b62d3fa2cc3aca15e3e7c684198b40e915be82f4fdd175"
)

type auditJSON struct {
	FeatureSet, ReleaseVersion, Source                     string
	Checked, Missing, ExcludedPresent, NotDeleted, Unknown int
	Findings                                               []auditJSONFinding
	Errors                                                 []string
}

type auditJSONFinding struct {
	State, Group, Kind, Namespace, Name, File, Decision, Why, Evidence string
}

// listed is the findings other than unknown, as "state Kind ns/name".
func (r auditJSON) listed() []string {
	var out []string
	for _, f := range r.Findings {
		if f.State == stateUnknown {
			continue
		}
		name := f.Name
		if f.Namespace != "" {
			name = f.Namespace + "/" + name
		}
		out = append(out, f.State+" "+f.Kind+" "+name)
	}
	return out
}

func runAudit(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func runAuditJSON(t *testing.T, args ...string) (int, auditJSON, string) {
	t.Helper()
	code, out, errOut := runAudit(t, append(args, "-o", "json")...)
	var r auditJSON
	if code != 2 {
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("exit %d, %v: %s\n%s", code, err, out, errOut)
		}
	}
	return code, r, errOut
}

// copyMustGather copies the fixture must-gather into a test directory and
// returns its root and its image directory.
func copyMustGather(t *testing.T) (root, image string) {
	t.Helper()
	root = filepath.Join(t.TempDir(), "must-gather")
	if err := os.CopyFS(root, os.DirFS(seedMustGather)); err != nil {
		t.Fatal(err)
	}
	return root, filepath.Join(root, seedImageDir)
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// editFile replaces old, which must be there, with replacement.
func editFile(t *testing.T, path, old, replacement string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("%s has no %q", path, old)
	}
	writeFile(t, path, strings.Replace(string(data), old, replacement, 1))
}

const capiNamespace = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: openshift-cluster-api\n"

// addCAPINamespace makes the must-gather hold openshift-cluster-api, as
// `oc adm inspect ns/openshift-cluster-api` writes it.
func addCAPINamespace(t *testing.T, image string) {
	writeFile(t, filepath.Join(image, "namespaces", "openshift-cluster-api", "openshift-cluster-api.yaml"), capiNamespace)
}

func TestAuditMustGather(t *testing.T) {
	tests := []struct {
		name string
		// change the copied must-gather (root, image directory) and
		// returns the directory to pass.
		change     func(t *testing.T, root, image string) string
		wantCode   int
		wantSet    string
		wantListed []string
	}{{
		name:       "the seed: TechPreviewNoUpgrade without openshift-cluster-api",
		change:     func(_ *testing.T, root, _ string) string { return root },
		wantCode:   1,
		wantSet:    "TechPreviewNoUpgrade",
		wantListed: []string{"missing Namespace openshift-cluster-api"},
	}, {
		name:     "the image directory itself",
		change:   func(_ *testing.T, _, image string) string { return image },
		wantCode: 1, wantSet: "TechPreviewNoUpgrade",
		wantListed: []string{"missing Namespace openshift-cluster-api"},
	}, {
		name: "openshift-cluster-api applied",
		change: func(t *testing.T, root, image string) string {
			addCAPINamespace(t, image)
			return root
		},
		wantCode: 0, wantSet: "TechPreviewNoUpgrade",
	}, {
		name: "openshift-cluster-api as a cluster-scoped object",
		change: func(t *testing.T, root, image string) string {
			writeFile(t, filepath.Join(image, "cluster-scoped-resources", "core", "namespaces", "openshift-cluster-api.yaml"), capiNamespace)
			return root
		},
		wantCode: 0, wantSet: "TechPreviewNoUpgrade",
	}, {
		name: "Default with the tech preview namespace",
		change: func(t *testing.T, root, image string) string {
			editFile(t, filepath.Join(image, "cluster-scoped-resources", "config.openshift.io", "featuregates.yaml"),
				"featureSet: TechPreviewNoUpgrade", `featureSet: ""`)
			addCAPINamespace(t, image)
			return root
		},
		wantCode: 1, wantSet: "Default",
		wantListed: []string{"excluded-present Namespace openshift-cluster-api"},
	}, {
		name: "a deleted ConfigMap still there",
		change: func(t *testing.T, root, image string) string {
			addCAPINamespace(t, image)
			editFile(t, filepath.Join(image, "namespaces", "default", "core", "configmaps.yaml"),
				"kind: ConfigMapList", "- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: obsolete\n    namespace: default\nkind: ConfigMapList")
			return root
		},
		wantCode: 1, wantSet: "TechPreviewNoUpgrade",
		wantListed: []string{"not-deleted ConfigMap default/obsolete"},
	}, {
		name: "an always-applied ConfigMap missing from its namespace's list",
		change: func(t *testing.T, root, image string) string {
			addCAPINamespace(t, image)
			editFile(t, filepath.Join(image, "namespaces", "default", "core", "configmaps.yaml"), "name: always", "name: renamed")
			return root
		},
		wantCode: 1, wantSet: "TechPreviewNoUpgrade",
		wantListed: []string{"missing ConfigMap default/always"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root, image := copyMustGather(t)
			dir := tt.change(t, root, image)
			code, r, errOut := runAuditJSON(t, "--manifests-dir", seedPayload, "--must-gather", dir, "--release-version", seedVersion)
			if code != tt.wantCode {
				t.Fatalf("exit %d, want %d: %+v\n%s", code, tt.wantCode, r, errOut)
			}
			if !slices.Equal(r.listed(), tt.wantListed) {
				t.Errorf("listed %q, want %q", r.listed(), tt.wantListed)
			}
			if r.FeatureSet != tt.wantSet || r.Source != "must-gather "+image || r.Checked != 5 {
				t.Errorf("feature set %q, source %q, checked %d", r.FeatureSet, r.Source, r.Checked)
			}
			// A must-gather collects no ClusterRoleBindings: unknown, not missing.
			if r.Unknown != 1 || !slices.ContainsFunc(r.Findings, func(f auditJSONFinding) bool {
				return f.State == stateUnknown && f.Kind == "ClusterRoleBinding" && strings.HasPrefix(f.Evidence, "not collected")
			}) {
				t.Errorf("unknown %d: %+v", r.Unknown, r.Findings)
			}
		})
	}
}

// The table: one row per listed object, with the decision's reason, then
// the summary naming the feature set, where it was read and the unknown.
func TestAuditMustGatherTable(t *testing.T) {
	code, out, errOut := runAudit(t, "--manifests-dir", seedPayload, "--must-gather", seedMustGather, "--release-version", seedVersion)
	if code != 1 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 {
		t.Fatalf("want header, one row and the summary:\n%s", out)
	}
	for _, want := range []string{"STATE", "KIND", "NAMESPACE/NAME", "FILE", "WHY"} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("header %q has no %s", lines[0], want)
		}
	}
	if f := strings.Fields(lines[1]); len(f) < 5 || f[0] != "missing" || f[1] != "Namespace" || f[2] != "openshift-cluster-api" ||
		f[3] != "0000_30_cluster-api_capi-operator_00_namespace.yaml" || !strings.Contains(lines[1], `release.openshift.io/feature-gate: "TechPreviewNoUpgrade"`) {
		t.Errorf("row %q", lines[1])
	}
	for _, want := range []string{
		"Feature set TechPreviewNoUpgrade (FeatureGate cluster, release 4.10.0-rc.1) read from must-gather " + filepath.Join(seedMustGather, seedImageDir),
		"5 objects checked: 1 missing, 0 excluded but present, 0 not deleted, 1 unknown (not collected: ClusterRoleBinding.rbac.authorization.k8s.io ×1)",
	} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("summary %q has no %q", lines[2], want)
		}
	}

	// Nothing to list: the summary alone.
	_, image := copyMustGather(t)
	addCAPINamespace(t, image)
	code, out, _ = runAudit(t, "--manifests-dir", seedPayload, "--must-gather", image, "--release-version", seedVersion)
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "Feature set TechPreviewNoUpgrade") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestAuditBadInput(t *testing.T) {
	root, image := copyMustGather(t)
	featureGates := filepath.Join(image, "cluster-scoped-resources", "config.openshift.io", "featuregates.yaml")
	noFeatureGate, noFGImage := copyMustGather(t)
	noFG := filepath.Join(noFGImage, "cluster-scoped-resources", "config.openshift.io", "featuregates.yaml")
	if err := os.Remove(noFG); err != nil {
		t.Fatal(err)
	}
	editFile(t, featureGates, "featureSet: TechPreviewNoUpgrade", "featureSett: TechPreviewNoUpgrade")
	badPayload := t.TempDir()
	if err := os.CopyFS(badPayload, os.DirFS(seedPayload)); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(badPayload, "0000_99_broken.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: [\n")
	twoImages := t.TempDir()
	for _, d := range []string{"a", "b"} {
		if err := os.MkdirAll(filepath.Join(twoImages, d, "namespaces"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	good, _ := copyMustGather(t)
	missing := filepath.Join(t.TempDir(), "nowhere")

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"neither source", []string{"--manifests-dir", seedPayload}, []string{"exactly one of --from-cluster and --must-gather"}},
		{"both sources", []string{"--manifests-dir", seedPayload, "--must-gather", good, "--from-cluster"}, []string{"exactly one of --from-cluster and --must-gather"}},
		{"no manifests dir flag", []string{"--must-gather", good}, []string{"--manifests-dir is required"}},
		{"missing manifests dir", []string{"--manifests-dir", missing, "--must-gather", good}, []string{"--manifests-dir", missing}},
		{"missing must-gather", []string{"--manifests-dir", seedPayload, "--must-gather", missing}, []string{"--must-gather", missing}},
		{"not a must-gather", []string{"--manifests-dir", seedPayload, "--must-gather", seedPayload}, []string{seedPayload + ": not a must-gather"}},
		{"a file that is no archive", []string{"--manifests-dir", seedPayload, "--must-gather", filepath.Join(seedMustGather, "timestamp")}, []string{
			filepath.Join(seedMustGather, "timestamp") + ": not a must-gather archive (.tar or .tar.gz)"}},
		{"two empty image directories", []string{"--manifests-dir", seedPayload, "--must-gather", twoImages}, []string{
			"FeatureGate cluster not read", filepath.Join(twoImages, "b", "cluster-scoped-resources", "config.openshift.io", "featuregates.yaml")}},
		{"unreadable FeatureGate", []string{"--manifests-dir", seedPayload, "--must-gather", root}, []string{
			"--must-gather: FeatureGate cluster not read; no feature set assumed: " + featureGates, "featureSett"}},
		{"no FeatureGate", []string{"--manifests-dir", seedPayload, "--must-gather", noFeatureGate}, []string{
			"FeatureGate cluster not read; no feature set assumed", "neither " + filepath.Join(noFGImage, "cluster-scoped-resources", "config.openshift.io", "featuregates", "cluster.yaml") + " nor " + noFG}},
		{"no status entry for the version", []string{"--manifests-dir", seedPayload, "--must-gather", good, "--release-version", "4.11.0"}, []string{
			"initial FeatureGate not read yet: FeatureGate cluster has no status.featureGates entry for version 4.11.0"}},
		{"bad release version", []string{"--manifests-dir", seedPayload, "--must-gather", good, "--release-version", "four"}, []string{"--release-version"}},
		{"unreadable manifest", []string{"--manifests-dir", badPayload, "--must-gather", good, "--release-version", seedVersion}, []string{"0000_99_broken.yaml"}},
		{"bad output", []string{"--manifests-dir", seedPayload, "--must-gather", good, "-o", "yaml"}, []string{`-o "yaml"`}},
		{"kubeconfig without --from-cluster", []string{"--manifests-dir", seedPayload, "--must-gather", good, "--kubeconfig", missing}, []string{"--kubeconfig is only for --from-cluster"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, errOut := runAudit(t, tt.args...)
			if code != 2 {
				t.Errorf("exit %d, want 2: %s", code, errOut)
			}
			for _, w := range tt.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr has no %q:\n%s", w, errOut)
				}
			}
		})
	}
}

// Live, the audit reads the FeatureGate and ClusterVersion as `manifests
// --from-cluster` does and GETs every object.
func TestAuditFromCluster(t *testing.T) {
	cp := harness.StartControlPlane(t, controlplane.Options{})
	c := harness.Client(t, cp.Config)
	kubeconfig := harness.Kubeconfig(t, cp.Config)
	capi, err := os.ReadFile(filepath.Join(seedPayload, "0000_30_cluster-api_capi-operator_00_namespace.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := harness.WriteFiles(t, map[string]string{
		"0000_00_default_namespace.yaml":                      "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: default\n",
		"0000_30_cluster-api_capi-operator_00_namespace.yaml": string(capi),
		"0000_50_default-only_configmap.yaml":                 gated("default-only", "    release.openshift.io/feature-set: Default\n"),
	})
	args := []string{"--manifests-dir", dir, "--from-cluster", "--kubeconfig", kubeconfig, "--release-version", "4.22.0"}

	code, _, errOut := runAuditJSON(t, args...)
	if code != 2 || !strings.Contains(errOut, "--from-cluster: FeatureGate cluster not read; no feature set assumed") {
		t.Errorf("without a FeatureGate: exit %d, %s", code, errOut)
	}

	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.TechPreviewNoUpgrade, controlplane.StatusGates("4.22.0", nil, nil)))
	code, r, errOut := runAuditJSON(t, args...)
	if code != 1 || !slices.Equal(r.listed(), []string{"missing Namespace openshift-cluster-api"}) || r.Checked != 3 || r.Unknown != 0 {
		t.Errorf("nothing applied: exit %d, listed %q, %+v: %s", code, r.listed(), r, errOut)
	}
	if r.FeatureSet != "TechPreviewNoUpgrade" || !strings.Contains(r.Source, kubeconfig) {
		t.Errorf("feature set %q, source %q", r.FeatureSet, r.Source)
	}

	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "openshift-cluster-api"}}); err != nil {
		t.Fatal(err)
	}
	if code, r, errOut := runAuditJSON(t, args...); code != 0 || len(r.Findings) != 0 {
		t.Errorf("namespace created: exit %d, %+v: %s", code, r, errOut)
	}

	// Created by hand, or by an operator that took the cluster for Default.
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "default-only", Namespace: "default"}}); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runAudit(t, args...)
	if code != 1 || !strings.Contains(out, "excluded but present") || !strings.Contains(out, "default/default-only") ||
		!strings.Contains(out, "3 objects checked: 0 missing, 1 excluded but present") {
		t.Errorf("Default-only ConfigMap present: exit %d\n%s%s", code, out, errOut)
	}
}

// archive writes root's files into a .tar (gzipped when gz) the way
// must-gather archives are made: paths below one top directory.
func archive(t *testing.T, root string, gz bool) string {
	t.Helper()
	name := filepath.Join(t.TempDir(), "must-gather.tar")
	if gz {
		name += ".gz"
	}
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var w io.Writer = f
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(f)
		w = zw
	}
	tw := tar.NewWriter(w)
	if err := tw.AddFS(os.DirFS(root)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

// The seed's reporter had the archive: it is read as it is, .tar or
// .tar.gz, with the same findings as the directory, its files named inside
// the archive.
func TestAuditMustGatherArchive(t *testing.T) {
	_, dir, _ := runAuditJSON(t, "--manifests-dir", seedPayload, "--must-gather", seedMustGather, "--release-version", seedVersion)
	for _, gz := range []bool{false, true} {
		name := archive(t, seedMustGather, gz)
		code, r, errOut := runAuditJSON(t, "--manifests-dir", seedPayload, "--must-gather", name, "--release-version", seedVersion)
		if code != 1 {
			t.Fatalf("%s: exit %d: %s", name, code, errOut)
		}
		if got, want := r.listed(), dir.listed(); !slices.Equal(got, want) || r.Unknown != dir.Unknown || r.Checked != dir.Checked {
			t.Errorf("%s: listed %v (unknown %d), want %v (unknown %d) as from the directory", name, got, r.Unknown, want, dir.Unknown)
		}
		if want := "must-gather " + name + " (image directories "; strings.HasPrefix(r.Source, want) {
			t.Errorf("source %q: one image directory, not several", r.Source)
		}
		if !strings.Contains(r.Source, name) {
			t.Errorf("source %q does not name %s", r.Source, name)
		}
	}
}

// A must-gather run with several images has an image directory each: an
// object found in any of them is present.
func TestAuditMustGatherSeveralImageDirectories(t *testing.T) {
	root, _ := copyMustGather(t)
	other := filepath.Join(root, "quay-io-openshift-other-must-gather")
	addCAPINamespace(t, other)
	for _, src := range []string{root, archive(t, root, true)} {
		code, r, errOut := runAuditJSON(t, "--manifests-dir", seedPayload, "--must-gather", src, "--release-version", seedVersion)
		if code != 0 {
			t.Errorf("%s: exit %d, want 0 (the namespace is in the other image directory): %v %s", src, code, r.listed(), errOut)
		}
		if !strings.Contains(r.Source, "image directories "+filepath.Base(other)+", "+seedImageDir) {
			t.Errorf("source %q does not name both image directories", r.Source)
		}
	}
}

// gated is a ConfigMap manifest with the given annotations.
func gated(name, annotations string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: default\n  annotations:\n" +
		"    include.release.openshift.io/self-managed-high-availability: \"true\"\n" + annotations
}
