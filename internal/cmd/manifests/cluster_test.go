package manifests

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/internal/clusterinputs"
	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// --from-cluster answers "what does my cluster get" with the live
// FeatureGate's gates for the release version and the live ClusterVersion,
// and refuses to guess when there is no FeatureGate.
func TestManifestsCommandFromCluster(t *testing.T) {
	cp := harness.StartControlPlane(t, controlplane.Options{})
	c := harness.Client(t, cp.Config)
	kubeconfig := harness.Kubeconfig(t, cp.Config)
	dir := harness.WriteFiles(t, map[string]string{
		"0000_10_a.yaml": gated("gate-on", "    release.openshift.io/feature-gate: GateA\n") + "---\n" +
			gated("gate-off", "    release.openshift.io/feature-gate: GateB\n") + "---\n" +
			gated("console", "    capability.openshift.io/name: Console\n") + "---\n" +
			gated("insights", "    capability.openshift.io/name: Insights\n"),
	})
	args := []string{"--manifests-dir", dir, "--from-cluster", "--kubeconfig", kubeconfig, "--release-version", "4.22.0", "-o", "json"}

	code, _, errOut := runManifests(t, args...)
	if code != 2 || !strings.Contains(errOut, "FeatureGate cluster not read; no feature set assumed") {
		t.Errorf("without a FeatureGate: exit %d, %s", code, errOut)
	}

	// An upgrade's new version starts before its status entry exists: the
	// operator is not ready then, and the command answers nothing either.
	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.TechPreviewNoUpgrade, controlplane.StatusGates("4.21.0", []string{"GateA"}, []string{"GateB"})))
	code, _, errOut = runManifests(t, args...)
	if code != 2 || !strings.Contains(errOut, "initial FeatureGate not read yet: FeatureGate cluster has no status.featureGates entry for version 4.22.0 yet") {
		t.Errorf("without the version's entry: exit %d, %s", code, errOut)
	}
	fg := &configv1.FeatureGate{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "cluster"}, fg); err != nil {
		t.Fatal(err)
	}
	fg.Status = controlplane.FeatureGate(configv1.TechPreviewNoUpgrade, controlplane.StatusGates("4.22.0", []string{"GateA"}, []string{"GateB"})).Status
	if err := c.Status().Update(context.Background(), fg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cv := &configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: clusterinputs.ClusterVersionName}, Spec: configv1.ClusterVersionSpec{ClusterID: "2b4c4e5a-0f7c-4f4e-9d8e-0a1b2c3d4e5f"}}
	if err := c.Create(ctx, cv); err != nil {
		t.Fatal(err)
	}
	cv.Status = configv1.ClusterVersionStatus{Desired: configv1.Release{Version: "4.22.0"}, Capabilities: configv1.ClusterVersionCapabilitiesStatus{
		KnownCapabilities:   []configv1.ClusterVersionCapability{configv1.ClusterVersionCapabilityConsole, configv1.ClusterVersionCapabilityInsights},
		EnabledCapabilities: []configv1.ClusterVersionCapability{configv1.ClusterVersionCapabilityConsole},
	}}
	if err := c.Status().Update(ctx, cv); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runManifests(t, args...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "feature set TechPreviewNoUpgrade, release version 4.22.0; capability filter on: 1 of 2") {
		t.Errorf("stderr = %s", errOut)
	}
	var r cmdReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"gate-on": true, "gate-off": false, "console": true, "insights": false}
	for _, m := range r.Manifests {
		for _, d := range m.Decisions {
			if d.Included != want[m.Name] {
				t.Errorf("%s: %+v, want included=%v", m.Name, d, want[m.Name])
			}
		}
	}
	// Built with the placeholder version, as the operator may be: the
	// version is the ClusterVersion's, as the operator resolves it.
	placeholder := slices.Clone(args)
	placeholder[slices.Index(placeholder, "4.22.0")] = "0.0.1-snapshot"
	if code, _, errOut := runManifests(t, placeholder...); code != 0 || !strings.Contains(errOut, "release version 4.22.0;") {
		t.Errorf("--release-version 0.0.1-snapshot: exit %d, %s", code, errOut)
	}
	if code, _, errOut := runManifests(t, append(args, "--feature-set", "Default")...); code != 2 || !strings.Contains(errOut, "not with --feature-gate") {
		t.Errorf("--from-cluster with --feature-set: exit %d, %s", code, errOut)
	}
}
