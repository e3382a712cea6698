package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// configMapVolume lays out dir as the kubelet lays out a ConfigMap volume:
// each version in a timestamped directory, ..data a symlink to the current
// one swapped with a rename, and the key a symlink through ..data.
type configMapVolume struct {
	dir string
	n   int
}

func (v *configMapVolume) path() string { return filepath.Join(v.dir, "featuregate.yaml") }

// write publishes files (key → content) as the volume's next version.
func (v *configMapVolume) write(t *testing.T, files map[string]string) {
	t.Helper()
	v.n++
	version := fmt.Sprintf("..2026_12_04_00_00_%02d.000000001", v.n)
	if err := os.Mkdir(filepath.Join(v.dir, version), 0o755); err != nil {
		t.Fatal(err)
	}
	for k, content := range files {
		if err := os.WriteFile(filepath.Join(v.dir, version, k), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(v.dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(v.path()); os.IsNotExist(err) {
		if err := os.Symlink(filepath.Join("..data", "featuregate.yaml"), v.path()); err != nil {
			t.Fatal(err)
		}
	}
}

func featureGateYAML(set string) string {
	return fmt.Sprintf("apiVersion: config.openshift.io/v1\nkind: FeatureGate\nmetadata:\n  name: cluster\nspec:\n  featureSet: %q\n", set)
}

// With --feature-gate-file (HyperShift's rendered FeatureGate, MicroShift's
// missing API) the operator keeps the same discipline: not ready until the
// file is read, saying which file; a file that vanishes is waited out with
// the snapshot kept; a changed file ends the process with exit 0.
func TestProcessFeatureGateFile(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	cp := startControlPlane(t, nil) // no FeatureGate object: the file is all there is
	vol := &configMapVolume{dir: t.TempDir()}

	o := startOperator(t, "operator", harness.Kubeconfig(t, cp.Config), "--feature-gate-file="+vol.path())
	g.Eventually(o.ReadyzReason).WithTimeout(readyTimeout).Should(And(ContainSubstring(logNotReadYet), ContainSubstring(vol.path())))
	g.Consistently(o.Ready).WithTimeout(notReadyWindow).Should(BeFalse())

	vol.write(t, map[string]string{"featuregate.yaml": featureGateYAML("")})
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(o.Logged(snapshotOf("Default"))).To(Succeed())

	// The key gone from the volume: reported, waited out, no restart.
	vol.write(t, map[string]string{"other.yaml": "x: 1\n"})
	g.Eventually(func() int {
		return o.Log.CountWhere(harness.All(harness.Message("FeatureGate view not current; reading it again"), harness.KeyContains("reason", vol.path())))
	}).WithTimeout(readyTimeout).Should(BeNumerically(">", 0))
	vol.write(t, map[string]string{"featuregate.yaml": featureGateYAML("Default")})
	g.Eventually(func() int {
		return o.Log.CountWhere(harness.Message("FeatureGate read again; its view is current"))
	}).WithTimeout(readyTimeout).Should(BeNumerically(">", 0))
	g.Expect(o.Running()).To(BeTrue(), "the same feature set again: no restart")
	g.Expect(o.Ready()).To(BeTrue())

	vol.write(t, map[string]string{"featuregate.yaml": featureGateYAML("TechPreviewNoUpgrade")})
	g.Expect(o.WaitExit(exitTimeout)).To(Equal(0))
	g.Expect(o.Logged(harness.All(changedBy(defaultToTech), harness.KeyEquals("detectedBy", "verify")))).To(Succeed())
}
