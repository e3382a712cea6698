package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/internal/controlplane"
	"github.com/featuregate-operator/operator/internal/testharness"
)

// `make run-local`'s helper brings up the control plane and the operator,
// hands out a working kubeconfig, restarts the operator after a change as a
// kubelet would, and on Ctrl-C stops everything and leaves nothing behind.
func TestRunLocalStartsAndStopsCleanly(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	runLocal := filepath.Join(t.TempDir(), "run-local")
	build := exec.Command("go", "build", "-o", runLocal, "./hack/run-local")
	build.Dir = repoRoot
	out, err := build.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))

	probe := testharness.FreeAddr(t)
	p := testharness.StartT(t, testharness.Options{
		Name: "run-local",
		Path: runLocal,
		Args: []string{"-manager", managerBin, "--", "--health-probe-bind-address=" + probe, "--metrics-bind-address=0"},
		Dir:  repoRoot,
		Env:  []string{"FEATURE_SET=Default", "KUBEBUILDER_ASSETS=" + assetsDir},
		// The operator's probes, which run-local passes on.
		Probe: probe,
	})
	text := p.Log.String

	kubeconfigLine := regexp.MustCompile(`export KUBECONFIG=(\S+)`)
	g.Eventually(text).WithTimeout(readyTimeout).Should(MatchRegexp(kubeconfigLine.String()))
	kubeconfig := kubeconfigLine.FindStringSubmatch(text())[1]
	ready := p.Ready
	g.Eventually(ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(p.Log.IndexWhere(snapshotOf("Default"))).To(BeNumerically(">=", 0))

	// The printed kubeconfig works; a change restarts the operator.
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := controlplane.NewClient(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	fg := &configv1.FeatureGate{}
	g.Expect(c.Get(t.Context(), client.ObjectKey{Name: "cluster"}, fg)).To(Succeed())
	fg.Spec.FeatureSet = configv1.TechPreviewNoUpgrade
	g.Expect(c.Update(t.Context(), fg)).To(Succeed())
	g.Eventually(text).WithTimeout(exitTimeout).Should(ContainSubstring("starting it again"))
	g.Eventually(func() int { return p.Log.IndexWhere(snapshotOf("TechPreviewNoUpgrade")) }).WithTimeout(readyTimeout).Should(BeNumerically(">=", 0))
	g.Eventually(ready).WithTimeout(readyTimeout).Should(BeTrue())

	// Ctrl-C: the terminal signals run-local alone (the operator has its own
	// process group); everything stops and is removed.
	g.Expect(p.Signal(os.Interrupt)).To(Succeed())
	g.Expect(p.WaitExit(time.Minute)).To(Equal(0), "run-local exits 0 after Ctrl-C")
	g.Expect(text()).To(And(ContainSubstring("operator exited 0 after the interrupt"), ContainSubstring("stopping the control plane")))
	g.Expect(p.Log.IndexWhere(shutdownFor("signal"))).To(BeNumerically(">=", 0))
	_, err = os.Stat(filepath.Dir(kubeconfig))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the kubeconfig directory is removed")
	g.Expect(ready()).To(BeFalse())
}
