package e2e

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

var (
	kubeconfigLine = regexp.MustCompile(`export KUBECONFIG=(\S+)`)
	probeLine      = regexp.MustCompile(`probes on http://(\S+) `)
)

// buildRunLocal builds `make run-local`'s helper.
func buildRunLocal(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "run-local")
	build := exec.Command("go", "build", "-o", bin, "./hack/run-local")
	build.Dir = repoRoot
	out, err := build.CombinedOutput()
	if err != nil {
		t.Fatalf("build hack/run-local: %v\n%s", err, out)
	}
	return bin
}

// `make run-local`'s helper brings up the control plane and the operator,
// hands out a working kubeconfig, applies the seed's payload by default (so
// the README's patch brings the openshift-cluster-api namespace), restarts
// the operator after a change as a kubelet would, and on Ctrl-C stops
// everything and leaves nothing behind.
func TestRunLocalStartsAndStopsCleanly(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	probe := harness.FreeAddr(t)
	p := harness.StartT(t, harness.Options{
		Name: "run-local",
		Path: buildRunLocal(t),
		Args: []string{"-manager", managerBin, "--", "--health-probe-bind-address=" + probe, "--metrics-bind-address=0"},
		Dir:  repoRoot,
		Env:  []string{"FEATURE_SET=Default", "KUBEBUILDER_ASSETS=" + assetsDir},
		// The operator's probes, which run-local passes on.
		Probe: probe,
	})
	text := p.Log.String

	g.Eventually(text).WithTimeout(readyTimeout).Should(MatchRegexp(kubeconfigLine.String()))
	kubeconfig := kubeconfigLine.FindStringSubmatch(text())[1]
	g.Expect(probeLine.FindStringSubmatch(text())).To(HaveExactElements(ContainSubstring(probe), probe), "the probe address in effect is printed")
	ready := p.Ready
	g.Eventually(ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(p.Logged(snapshotOf("Default"))).To(Succeed())

	// The printed kubeconfig works; a change restarts the operator, which
	// then applies the seed's TechPreviewNoUpgrade namespace.
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := controlplane.NewClient(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(p.Log.IndexWhere).WithArguments(harness.All(harness.Message("Manifests applied"), harness.KeyEquals("featureSet", "Default"))).
		WithTimeout(readyTimeout).Should(BeNumerically(">=", 0))
	fg := &configv1.FeatureGate{}
	g.Expect(c.Get(t.Context(), client.ObjectKey{Name: "cluster"}, fg)).To(Succeed())
	fg.Spec.FeatureSet = configv1.TechPreviewNoUpgrade
	g.Expect(c.Update(t.Context(), fg)).To(Succeed())
	g.Eventually(text).WithTimeout(exitTimeout).Should(ContainSubstring("starting it again"))
	g.Eventually(func() int { return p.Log.IndexWhere(snapshotOf("TechPreviewNoUpgrade")) }).WithTimeout(readyTimeout).Should(BeNumerically(">=", 0))
	g.Eventually(ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Eventually(func() error {
		return c.Get(t.Context(), client.ObjectKey{Name: "openshift-cluster-api"}, &corev1.Namespace{})
	}).WithTimeout(readyTimeout).Should(Succeed(), "the seed's TechPreviewNoUpgrade namespace")

	// Ctrl-C: the terminal signals run-local alone (the operator has its own
	// process group); everything stops and is removed.
	g.Expect(p.Signal(os.Interrupt)).To(Succeed())
	g.Expect(p.WaitExit(time.Minute)).To(Equal(0), "run-local exits 0 after Ctrl-C")
	g.Expect(text()).To(And(ContainSubstring("operator exited 0 after the interrupt"), ContainSubstring("stopping the control plane")))
	g.Expect(p.Logged(shutdownFor("signal"))).To(Succeed())
	_, err = os.Stat(filepath.Dir(kubeconfig))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the kubeconfig directory is removed")
	g.Expect(ready()).To(BeFalse())
}

// `make run-local | tee log`, then Ctrl-C: the terminal's SIGINT reaches
// run-local, tee and the control plane together, and tee is gone before
// run-local writes its goodbye. The cleanup must not depend on stdout:
// run-local still exits 0, and nothing of it is left running or on disk.
// With 8081 and 8443 taken, the probes and metrics go to free loopback
// ports, which run-local prints.
func TestRunLocalCtrlCThroughTee(t *testing.T) {
	lane(t)
	g := NewWithT(t)
	for _, port := range []string{"8081", "8443"} {
		if l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", port)); err == nil {
			t.Cleanup(func() { l.Close() })
		}
	}
	p := harness.StartT(t, harness.Options{
		Name: "run-local",
		Path: buildRunLocal(t),
		Args: []string{"-manager", managerBin},
		Dir:  repoRoot,
		Env:  []string{"FEATURE_SET=Default", "KUBEBUILDER_ASSETS=" + assetsDir},
	})
	text := p.Log.String
	g.Eventually(text).WithTimeout(readyTimeout).Should(MatchRegexp(probeLine.String()))
	kubeconfig := kubeconfigLine.FindStringSubmatch(text())[1]
	dir := filepath.Dir(kubeconfig)
	p.Probe = probeLine.FindStringSubmatch(text())[1]
	host, port, err := net.SplitHostPort(p.Probe)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(host).To(Equal("127.0.0.1"), "probes on loopback")
	g.Expect(port).NotTo(Equal("8081"), "8081 is taken")
	g.Expect(text()).To(MatchRegexp(`metrics on https://127\.0\.0\.1:\d+/metrics`))
	g.Expect(text()).NotTo(ContainSubstring("metrics on https://127.0.0.1:8443/"))
	g.Eventually(p.Ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(harness.ProcessesMentioning(dir)).NotTo(BeEmpty(), "etcd and kube-apiserver run from %s", dir)

	g.Expect(p.CloseOutput()).To(Succeed())
	g.Expect(p.SignalGroup(syscall.SIGINT)).To(Succeed())
	g.Expect(p.WaitExit(time.Minute)).To(Equal(0), "run-local exits 0 after Ctrl-C with its stdout gone")
	g.Eventually(func() []int { return harness.ProcessesMentioning(dir) }).WithTimeout(10*time.Second).Should(BeEmpty(), "nothing of run-local is left running")
	_, err = os.Stat(dir)
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "%s is removed", dir)
	g.Expect(p.Ready()).To(BeFalse())
}
