package manifests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

type cmdReport struct {
	Profile     string
	FeatureSets []string
	Cluster     struct {
		Capabilities *struct {
			KnownCapabilities, EnabledCapabilities []string
		}
		MajorVersion      *uint64
		ExcludeIdentifier string
	}
	Manifests []struct {
		File, Kind, Name string
		Decisions        map[string]struct {
			Included, Delete, CreateOnly bool
			Reason                       string
		}
	}
	Errors []struct{ File, Error string }
}

func runManifests(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := Run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func gated(name, annotations string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: default\n  annotations:\n" +
		"    include.release.openshift.io/self-managed-high-availability: \"true\"\n" + annotations
}

const testFeatureGate = `apiVersion: config.openshift.io/v1
kind: FeatureGate
metadata:
  name: cluster
spec:
  featureSet: TechPreviewNoUpgrade
status:
  featureGates:
  - version: 4.22.0
    enabled:
    - name: GateA
    disabled:
    - name: GateB
  - version: 4.21.0
    enabled:
    - name: GateB
    disabled:
    - name: GateA
`

// The command evaluates gate lists with the FeatureGate file's gates.
func TestManifestsCommandFeatureGate(t *testing.T) {
	files := harness.WriteFiles(t, map[string]string{"featuregate.yaml": testFeatureGate})
	dir := harness.WriteFiles(t, map[string]string{
		"0000_10_a.yaml":      gated("a", "    release.openshift.io/feature-gate: GateA\n"),
		"0000_10_b.yaml":      gated("b", "    release.openshift.io/feature-gate: GateB\n"),
		"0000_10_not-b.yaml":  gated("not-b", "    release.openshift.io/feature-gate: -GateB\n"),
		"0000_20_tp.yaml":     gated("tp", "    release.openshift.io/feature-set: TechPreviewNoUpgrade\n"),
		"0000_30_gone.yaml":   gated("gone", "    release.openshift.io/delete: \"true\"\n"),
		"0000_40_create.yaml": gated("create", "    release.openshift.io/create-only: \"true\"\n"),
		"0000_50_console.yaml": gated("console", "    capability.openshift.io/name: Console\n") + "---\n" +
			gated("insights", "    capability.openshift.io/name: Insights\n"),
	})
	fg := filepath.Join(files, "featuregate.yaml")
	decide := func(t *testing.T, args ...string) map[string]string {
		t.Helper()
		code, out, errOut := runManifests(t, append([]string{"--manifests-dir", dir, "--feature-gate", fg, "--cluster-profile", "self-managed-high-availability", "-o", "json"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var r cmdReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		if len(r.FeatureSets) != 1 || r.FeatureSets[0] != "TechPreviewNoUpgrade" {
			t.Fatalf("featureSets = %v, want the file's", r.FeatureSets)
		}
		states := map[string]string{}
		for _, m := range r.Manifests {
			d := m.Decisions["TechPreviewNoUpgrade"]
			state := "excluded"
			switch {
			case d.Included && d.CreateOnly:
				state = "create-only"
			case d.Included:
				state = "included"
			case d.Delete:
				state = "delete"
			}
			if d.Reason == "" {
				t.Errorf("%s: no reason", m.Name)
			}
			states[m.Name] = state + ": " + d.Reason
		}
		return states
	}
	check := func(t *testing.T, states map[string]string, want map[string]string) {
		t.Helper()
		for name, w := range want {
			if !strings.HasPrefix(states[name], w) {
				t.Errorf("%s = %q, want prefix %q", name, states[name], w)
			}
		}
	}

	// No version: the first status entry (4.22.0: GateA on).
	check(t, decide(t), map[string]string{
		"a": "included", "b": "excluded: feature gate GateB is not enabled", "not-b": "included",
		"tp": "included", "gone": "delete", "create": "create-only", "console": "included", "insights": "included",
	})
	// 4.21.0: GateB on, GateA off; and the major version is 4.
	check(t, decide(t, "--release-version", "4.21.0"), map[string]string{
		"a": "excluded: feature gate GateA is not enabled", "b": "included", "not-b": "excluded",
	})
	// Capabilities: the known ones are openshift/api's.
	check(t, decide(t, "--capabilities", "Console"), map[string]string{
		"console": "included", "insights": "excluded: capability.openshift.io/name: \"Insights\" needs capabilities that are not enabled",
	})
	check(t, decide(t, "--capabilities="), map[string]string{"console": "excluded", "a": "included"})
}

// The real payload FeatureGate files of the pinned openshift/api work as
// they are: ClusterAPIMachineManagement is on in TechPreviewNoUpgrade only.
func TestManifestsCommandPayloadFeatureGate(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/openshift/api").Output()
	if err != nil {
		t.Fatal(err)
	}
	fgDir := filepath.Join(strings.TrimSpace(string(out)), "payload-manifests", "featuregates")
	dir := harness.WriteFiles(t, map[string]string{
		"0000_30_capi.yaml": gated("capi", "    release.openshift.io/feature-gate: ClusterAPIMachineManagement\n"),
	})
	for file, want := range map[string]bool{
		"featureGate-4-10-SelfManagedHA-TechPreviewNoUpgrade.yaml": true,
		"featureGate-4-10-SelfManagedHA-Default.yaml":              false,
	} {
		for _, version := range []string{"", "4.22.0"} {
			// The payload files are templates: one entry, empty version.
			code, out, errOut := runManifests(t, "--manifests-dir", dir, "--feature-gate", filepath.Join(fgDir, file), "--release-version", version, "-o", "json")
			if code != 0 {
				t.Fatalf("%s %q: exit %d: %s", file, version, code, errOut)
			}
			if template := strings.Contains(errOut, "using its entry with an empty version"); template != (version != "") {
				t.Errorf("%s %q: stderr %q", file, version, errOut)
			}
			var r cmdReport
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatal(err)
			}
			for _, d := range r.Manifests[0].Decisions {
				if d.Included != want {
					t.Errorf("%s %q: capi = %+v, want included %v", file, version, d, want)
				}
			}
		}
	}
}

func TestManifestsCommandClusterVersion(t *testing.T) {
	files := harness.WriteFiles(t, map[string]string{
		"cv.yaml": `apiVersion: config.openshift.io/v1
kind: ClusterVersion
metadata:
  name: version
spec:
  clusterID: 00000000-0000-0000-0000-000000000000
  overrides:
  - kind: ConfigMap
    group: ""
    namespace: default
    name: mine
    unmanaged: true
status:
  desired: {version: 4.22.0}
  observedGeneration: 1
  versionHash: x
  availableUpdates: null
  capabilities:
    knownCapabilities: [Console, Insights]
    enabledCapabilities: [Console]
`,
		"no-caps.yaml": "apiVersion: config.openshift.io/v1\nkind: ClusterVersion\nmetadata:\n  name: version\nspec:\n  clusterID: x\n",
	})
	dir := harness.WriteFiles(t, map[string]string{
		"0000_10_a.yaml": gated("mine", "") + "---\n" + gated("insights", "    capability.openshift.io/name: Insights\n") + "---\n" +
			gated("hosted", "    exclude.release.openshift.io/hypershift: \"true\"\n"),
	})
	code, out, errOut := runManifests(t, "--manifests-dir", dir, "--cluster-version", filepath.Join(files, "cv.yaml"), "--feature-set", "Default", "--exclude-identifier", "hypershift", "--release-version", "4.22.0", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var r cmdReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if r.Cluster.Capabilities == nil || len(r.Cluster.Capabilities.EnabledCapabilities) != 1 || r.Cluster.MajorVersion == nil || *r.Cluster.MajorVersion != 4 || r.Cluster.ExcludeIdentifier != "hypershift" {
		t.Errorf("cluster = %+v", r.Cluster)
	}
	for i, want := range []string{"spec.overrides marks ConfigMap default/mine unmanaged", "not enabled: Insights", "exclude.release.openshift.io/hypershift"} {
		if d := r.Manifests[i].Decisions["Default"]; d.Included || !strings.Contains(d.Reason, want) {
			t.Errorf("%s = %+v, want excluded: %s", r.Manifests[i].Name, d, want)
		}
	}
	// No capabilities in the file: the filter is off, and says so.
	code, out, errOut = runManifests(t, "--manifests-dir", dir, "--cluster-version", filepath.Join(files, "no-caps.yaml"), "-o", "json")
	if code != 0 || !strings.Contains(errOut, "capability filter off") || !strings.Contains(out, `"capabilities": null`) {
		t.Errorf("no capabilities: exit %d, %s\n%s", code, errOut, out)
	}
}

func TestManifestsCommandBadInput(t *testing.T) {
	files := harness.WriteFiles(t, map[string]string{
		"fg.yaml":           testFeatureGate,
		"typo.yaml":         strings.Replace(testFeatureGate, "featureSet:", "featureSett:", 1),
		"cv-as-fg.yaml":     "apiVersion: config.openshift.io/v1\nkind: ClusterVersion\nmetadata:\n  name: version\n",
		"unknown-set.yaml":  strings.Replace(testFeatureGate, "featureSet: TechPreviewNoUpgrade", "featureSet: TechPreview", 1),
		"bad-override.yaml": "apiVersion: config.openshift.io/v1\nkind: ClusterVersion\nmetadata:\n  name: version\nspec:\n  clusterID: x\n  overrides:\n  - kind: ConfigMap\n    group: \"\"\n    namespace: x\n    name: \"\"\n    unmanaged: true\n",
	})
	dir := harness.WriteFiles(t, map[string]string{"0000_10_a.yaml": gated("a", "")})
	f := func(name string) string { return filepath.Join(files, name) }
	for _, tt := range []struct {
		args []string
		want []string
	}{
		{[]string{"--feature-gate", f("missing.yaml")}, []string{"--feature-gate", "missing.yaml", "no such file"}},
		{[]string{"--feature-gate", f("typo.yaml")}, []string{"--feature-gate", "typo.yaml", "featureSett"}},
		{[]string{"--feature-gate", f("cv-as-fg.yaml")}, []string{"cv-as-fg.yaml", `is not a FeatureGate: kind is "ClusterVersion"`}},
		{[]string{"--feature-gate", f("unknown-set.yaml")}, []string{"unknown-set.yaml", `spec.featureSet "TechPreview"`}},
		{[]string{"--feature-gate", f("fg.yaml"), "--release-version", "4.9.0"}, []string{"fg.yaml", "no status.featureGates entry for version 4.9.0"}},
		{[]string{"--release-version", "next"}, []string{"--release-version", `"next"`}},
		{[]string{"--capabilities", "Console,Bogus"}, []string{"--capabilities", `"Bogus"`}},
		{[]string{"--cluster-version", f("fg.yaml")}, []string{"--cluster-version", "fg.yaml", `is not a ClusterVersion: kind is "FeatureGate"`}},
		{[]string{"--cluster-version", f("bad-override.yaml")}, []string{"bad-override.yaml", "spec.overrides[0]"}},
		{[]string{"--feature-gate", f("fg.yaml"), "--feature-set", "Default"}, []string{"--feature-set and --feature-gate"}},
		{[]string{"--capabilities", "Console", "--cluster-version", f("fg.yaml")}, []string{"--capabilities and --cluster-version"}},
		{[]string{"--feature-set", "TechPreview"}, []string{`"TechPreview"`}},
		{[]string{"-o", "yaml"}, []string{`"yaml"`}},
	} {
		code, _, errOut := runManifests(t, append([]string{"--manifests-dir", dir}, tt.args...)...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", tt.args, code, errOut)
		}
		for _, w := range tt.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr %q does not contain %q", tt.args, errOut, w)
			}
		}
	}
	if code, _, _ := runManifests(t); code != 2 {
		t.Errorf("no --manifests-dir: exit %d, want 2", code)
	}
}

// Two kept manifests for one object are an error naming both files: exit 1.
func TestManifestsCommandDuplicates(t *testing.T) {
	dir := harness.WriteFiles(t, map[string]string{
		"0000_10_a.yaml": gated("x", ""),
		"0000_20_b.yaml": gated("x", "    release.openshift.io/feature-set: TechPreviewNoUpgrade\n"),
	})
	code, out, _ := runManifests(t, "--manifests-dir", dir)
	if code != 1 || !strings.Contains(out, "TechPreviewNoUpgrade: 0000_10_a.yaml[0] and 0000_20_b.yaml[0] are both ConfigMap default/x") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	if strings.Contains(out, "Default: 0000_10_a.yaml") {
		t.Errorf("Default keeps one of them, yet reports a duplicate:\n%s", out)
	}
	if code, _, _ := runManifests(t, "--manifests-dir", dir, "--feature-set", "Default"); code != 0 {
		t.Errorf("Default only: exit %d, want 0", code)
	}
}

// The shipped payload role is what --rbac derives from the shipped payload,
// and that payload is the seed: `make manifests` keeps them together, and
// this test fails when one is changed without the other.
func TestPayloadRoleMatchesPayload(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"--manifests-dir", "../../../config/payload/manifests", "--rbac"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	shipped, err := os.ReadFile("../../../config/payload/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if stdout.String() != string(shipped) {
		t.Fatalf("config/payload/role.yaml is not what `manager manifests --rbac` derives from config/payload/manifests: run `make manifests`\n--- derived:\n%s", stdout.String())
	}
	seed, err := filepath.Glob("../../../pkg/manifest/testdata/seed/*.yaml")
	if err != nil || len(seed) == 0 {
		t.Fatalf("seed manifests: %v", err)
	}
	for _, s := range seed {
		want, _ := os.ReadFile(s)
		got, err := os.ReadFile(filepath.Join("../../../config/payload/manifests", filepath.Base(s)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("config/payload/manifests/%s differs from %s (%v)", filepath.Base(s), s, err)
		}
	}
}

// The rules are the least that applying needs: by name wherever RBAC can
// restrict by name, create per namespace (or cluster-wide for a
// cluster-scoped kind), list beside it for what is applied (a resync's
// metadata-only read), delete only where a manifest asks for it.
func TestRBACRules(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"0000_10_ns.yaml":   "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: team-a\n",
		"0000_20_cm.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\n  namespace: team-a\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: two\n  namespace: team-a\n",
		"0000_30_dep.yaml":  "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: team-b\n",
		"0000_40_old.yaml":  "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: old\n  namespace: team-a\n  annotations:\n    release.openshift.io/delete: \"true\"\n",
		"0000_50_seed.yaml": "apiVersion: v1\nkind: Secret\nmetadata:\n  name: seed\n  namespace: team-b\n  annotations:\n    release.openshift.io/create-only: \"true\"\n",
		"0000_60_key.yaml":  "apiVersion: v1\nkind: Secret\nmetadata:\n  name: key\n  namespace: team-c\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var stdout, stderr bytes.Buffer
	if code := Run([]string{"--manifests-dir", dir, "--rbac"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		// cluster: namespaces create/list, get/patch team-a
		"kind: ClusterRole\nmetadata:\n  name: manager-payload-role\nrules:\n- apiGroups:\n  - \"\"\n  resources:\n  - namespaces\n  verbs:\n  - create\n  - list\n- apiGroups:\n  - \"\"\n  resourceNames:\n  - team-a\n  resources:\n  - namespaces\n  verbs:\n  - get\n  - patch\n",
		// team-a: configmaps create/list + get/patch one,two; serviceaccounts delete/get old, no create, no list
		"  namespace: team-a\nrules:\n- apiGroups:\n  - \"\"\n  resources:\n  - configmaps\n  verbs:\n  - create\n  - list\n- apiGroups:\n  - \"\"\n  resourceNames:\n  - one\n  - two\n  resources:\n  - configmaps\n  verbs:\n  - get\n  - patch\n- apiGroups:\n  - \"\"\n  resourceNames:\n  - old\n  resources:\n  - serviceaccounts\n  verbs:\n  - delete\n  - get\n",
		// team-b: secrets create + get seed (create-only: no patch, no list)
		// team-c: an applied Secret: no list, which would read every Secret
		"  namespace: team-c\nrules:\n- apiGroups:\n  - \"\"\n  resources:\n  - secrets\n  verbs:\n  - create\n- apiGroups:\n  - \"\"\n  resourceNames:\n  - key\n  resources:\n  - secrets\n  verbs:\n  - get\n  - patch\n",
		"  namespace: team-b\nrules:\n- apiGroups:\n  - \"\"\n  resources:\n  - secrets\n  verbs:\n  - create\n- apiGroups:\n  - \"\"\n  resourceNames:\n  - seed\n  resources:\n  - secrets\n  verbs:\n  - get\n- apiGroups:\n  - apps\n  resources:\n  - deployments\n  verbs:\n  - create\n  - list\n- apiGroups:\n  - apps\n  resourceNames:\n  - web\n  resources:\n  - deployments\n  verbs:\n  - get\n  - patch\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("--rbac output lacks\n%s\n--- got:\n%s", want, out)
		}
	}
}

// The placeholder version means "the cluster's version": without a cluster
// to read it from, the command refuses it rather than filter by a major
// version of 0 or look for a status entry named after the placeholder.
func TestManifestsPlaceholderNeedsACluster(t *testing.T) {
	dir := harness.WriteFiles(t, map[string]string{"0000_10_cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: one\n  namespace: default\n"})
	code, _, errOut := runManifests(t, "--manifests-dir", dir, "--feature-set", "Default", "--release-version", "0.0.1-snapshot")
	if code != 2 || !strings.Contains(errOut, "--release-version 0.0.1-snapshot is the version marker, resolved only from a cluster's ClusterVersion") {
		t.Errorf("exit %d, %s", code, errOut)
	}
}
