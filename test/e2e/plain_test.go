package e2e

import (
	"net/http"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// plain is examples/plain, a component without a controller-runtime
// manager that runs the guard's core (Guard.Run), built once.
var plain binary

// The guard without a manager, as a process: started while the API server
// is down it is not ready and reads nothing, takes its snapshot once the API
// answers, acts only then, and exits 0 when the feature set changes.
func TestPlainProcessWithoutManager(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	bin := plain.build(t, "plain", repoRoot, "./examples/plain")
	cp := startControlPlane(t, nil)
	c := harness.Client(t, cp.Config)
	harness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.Default))
	kc := harness.Kubeconfig(t, cp.Config)
	g.Expect(cp.StopAPIServer()).To(Succeed())

	probe := harness.FreeAddr(t)
	o := harness.StartT(t, harness.Options{Name: "plain", Path: bin, Probe: probe, Args: []string{
		"--kubeconfig=" + kc, "--health-probe-bind-address=" + probe,
	}, LogFile: filepath.Join(t.TempDir(), "plain.log")})
	g.Eventually(o.ReadyzStatus).WithTimeout(readyTimeout).Should(Equal(http.StatusInternalServerError))
	g.Eventually(o.ReadyzReason).WithTimeout(readyTimeout).Should(And(ContainSubstring(logNotReadYet), ContainSubstring(connRefused)))
	g.Consistently(o.Ready).WithTimeout(notReadyWindow).Should(BeFalse())
	g.Expect(o.Log.IndexWhere(logSnapshot)).To(Equal(-1), "no snapshot without the API")
	g.Expect(o.Log.First("Acted")).To(BeEmpty(), "acted before the snapshot")

	g.Expect(cp.StartAPIServer()).To(Succeed())
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(o.Logged(snapshotOf("Default"))).To(Succeed())
	g.Eventually(func() string { return o.Log.First("Acted") }).WithTimeout(readyTimeout).Should(ContainSubstring(`"featureSet":"Default"`))

	harness.SetFeatureSet(t, c, "cluster", configv1.TechPreviewNoUpgrade)
	g.Expect(o.WaitExit(exitTimeout)).To(Equal(0))
	g.Expect(o.Logged(changedBy(defaultToTech))).To(Succeed())
	g.Expect(o.Logged(shutdownFor(defaultToTech))).To(Succeed())
	g.Expect(errorLines(o.Log, `"logger":"events"`)).To(BeEmpty())
}
