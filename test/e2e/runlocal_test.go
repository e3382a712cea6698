package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/internal/controlplane"
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

	probe := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(runLocal, "-manager", managerBin, "--",
		"--health-probe-bind-address="+probe, "--metrics-bind-address=0")
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "FEATURE_SET=Default", "KUBEBUILDER_ASSETS="+assetsDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdout, err := cmd.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	cmd.Stderr = cmd.Stdout
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	var mu sync.Mutex
	var output strings.Builder
	go func() {
		s := bufio.NewScanner(stdout)
		s.Buffer(make([]byte, 1<<20), 1<<20)
		for s.Scan() {
			mu.Lock()
			output.WriteString(s.Text() + "\n")
			mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	text := func() string { mu.Lock(); defer mu.Unlock(); return output.String() }
	defer func() {
		if t.Failed() {
			t.Log(text())
		}
	}()

	kubeconfigLine := regexp.MustCompile(`export KUBECONFIG=(\S+)`)
	g.Eventually(text).WithTimeout(readyTimeout).Should(MatchRegexp(kubeconfigLine.String()))
	kubeconfig := kubeconfigLine.FindStringSubmatch(text())[1]
	ready := func() bool {
		resp, err := http.Get("http://" + probe + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}
	g.Eventually(ready).WithTimeout(readyTimeout).Should(BeTrue())
	g.Expect(text()).To(ContainSubstring("startup feature set Default"))

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
	g.Eventually(text).WithTimeout(readyTimeout).Should(ContainSubstring("startup feature set TechPreviewNoUpgrade"))
	g.Eventually(ready).WithTimeout(readyTimeout).Should(BeTrue())

	// Ctrl-C: the terminal signals run-local alone (the operator has its own
	// process group); everything stops and is removed.
	g.Expect(cmd.Process.Signal(os.Interrupt)).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var waitErr error
	g.Eventually(done).WithTimeout(time.Minute).Should(Receive(&waitErr))
	g.Expect(waitErr).NotTo(HaveOccurred(), "run-local exits 0 after Ctrl-C")
	g.Expect(text()).To(And(ContainSubstring("graceful shutdown complete: signal"), ContainSubstring("operator exited 0 after the interrupt"), ContainSubstring("stopping the control plane")))
	_, err = os.Stat(filepath.Dir(kubeconfig))
	g.Expect(os.IsNotExist(err)).To(BeTrue(), "the kubeconfig directory is removed")
	g.Expect(ready()).To(BeFalse())
}
