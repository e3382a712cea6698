package e2e

import (
	"net/http"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/internal/controlplane"
	"github.com/featuregate-operator/operator/internal/testharness"
)

// examples/consumer, a separate module whose main() only wires the guard,
// gets the whole behaviour: not ready while the API is down, ready after,
// a gate change made during an outage detected once the API returns, exit 0.
func TestConsumerExampleGetsTheWholeGuard(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	bin := filepath.Join(t.TempDir(), "consumer")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".")
	build.Dir = filepath.Join(repoRoot, "examples", "consumer")
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), "build examples/consumer: %s", out)

	const version = "4.99.0"
	cp := startControlPlane(t, nil)
	c := testharness.Client(t, cp.Config)
	testharness.CreateFeatureGate(t, c, controlplane.FeatureGate(configv1.Default, controlplane.StatusGates(version, []string{"GateA"}, []string{"GateB"})))
	kc := testharness.Kubeconfig(t, cp.Config)
	g.Expect(cp.StopAPIServer()).To(Succeed())

	probe := testharness.FreeAddr(t)
	o := testharness.StartT(t, testharness.Options{Name: "consumer", Path: bin, Probe: probe,
		Args: []string{"--kubeconfig=" + kc, "--health-probe-bind-address=" + probe, "--release-version=" + version}})
	g.Eventually(o.ReadyzStatus).WithTimeout(readyTimeout).Should(Equal(http.StatusInternalServerError))
	g.Eventually(o.ReadyzReason).WithTimeout(readyTimeout).Should(And(ContainSubstring(logNotReadYet), ContainSubstring(connRefused)))
	g.Consistently(o.Ready).WithTimeout(notReadyWindow).Should(BeFalse())

	g.Expect(cp.StartAPIServer()).To(Succeed())
	g.Eventually(o.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(o.Log.IndexWhere(testharness.All(logSnapshot, testharness.KeyEquals("snapshot", "Default (version "+version+": enabled [GateA], disabled [GateB])")))).To(BeNumerically(">=", 0))

	// GateB is enabled through a second API server while the consumer's is down.
	g.Expect(cp.StopAPIServer()).To(Succeed())
	second, err := cp.SecondAPIServer()
	g.Expect(err).NotTo(HaveOccurred())
	sc := testharness.Client(t, second)
	fg := &configv1.FeatureGate{}
	g.Expect(sc.Get(t.Context(), client.ObjectKey{Name: "cluster"}, fg)).To(Succeed())
	fg.Status.FeatureGates[0].Enabled = controlplane.GateAttributes("GateA", "GateB")
	fg.Status.FeatureGates[0].Disabled = controlplane.GateAttributes()
	g.Expect(sc.Status().Update(t.Context(), fg)).To(Succeed())
	g.Consistently(o.Running).WithTimeout(notReadyWindow).Should(BeTrue(), "nothing to see while its API server is down")

	g.Expect(cp.StartAPIServer()).To(Succeed())
	back := time.Now()
	g.Expect(o.WaitExit(60 * time.Second)).To(Equal(0))
	t.Logf("consumer exited %.2fs after its API server returned", time.Since(back).Seconds())
	g.Expect(o.Log.IndexWhere(changedBy("gate GateB disabled -> enabled in status for version " + version))).To(BeNumerically(">=", 0))
}
