package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// Deployed before the FeatureGate's CRD exists, the operator runs and is
// probed, but is not Ready: the kubelet's readiness probe reads /readyz
// failing on the featuregate check, whose own endpoint and the log say why
// (no CRD, then no FeatureGate). Once the FeatureGate exists the pod is
// Ready within seconds, and the container was never restarted.
func TestNotReadyUntilFeatureGateExists(t *testing.T) {
	needNode(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()

	deploy(t, deployOptions{})
	pod := onePod(ctx, t)
	g.Expect(pod.Status.PodIP).NotTo(BeEmpty())

	// The kubelet probes /readyz and reads the featuregate check failing.
	probeFailed := harness.Contains("Probe failed for http://"+pod.Status.PodIP+":8081/readyz", "[-]featuregate failed")
	g.Eventually(func() int { return cluster.Process("kubelet").Log.IndexWhere(probeFailed) }).
		WithTimeout(podTimeout).WithPolling(poll).Should(BeNumerically(">=", 0), "the kubelet's readiness probe output")
	g.Eventually(func() string { return readyzReason(ctx, pod.Status.PodIP) }).
		WithTimeout(podTimeout).WithPolling(poll).Should(ContainSubstring("initial FeatureGate not read yet"))
	g.Eventually(func() (bool, error) {
		lines, err := podLog(ctx, pod.Name, false)
		return logHas(lines, harness.All(harness.Message("FeatureGate not read; no feature set assumed, retrying"), harness.HasKey("error"))), err
	}).WithTimeout(podTimeout).WithPolling(time.Second).Should(BeTrue(), "the log says why")
	notReadyNoRestart := func(g Gomega) {
		p, err := getPod(ctx, pod.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ready(p)).To(BeFalse(), "Ready without a FeatureGate")
		g.Expect(managerStatus(p).RestartCount).To(BeZero(), "restarted while waiting")
	}
	g.Consistently(notReadyNoRestart).WithTimeout(5 * time.Second).WithPolling(poll).Should(Succeed())

	// The CRD alone is not enough: now the FeatureGate is missing.
	installCRDs(t)
	g.Eventually(func() string { return readyzReason(ctx, pod.Status.PodIP) }).
		WithTimeout(changeTimeout).WithPolling(poll).Should(ContainSubstring("FeatureGate cluster not found"))
	g.Consistently(notReadyNoRestart).WithTimeout(3 * time.Second).WithPolling(poll).Should(Succeed())

	createFeatureGate(t, configv1.Default)
	created := time.Now()
	g.Eventually(func(g Gomega) {
		p, err := getPod(ctx, pod.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ready(p)).To(BeTrue())
	}).WithTimeout(changeTimeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	t.Logf("Ready %s after the FeatureGate was created", time.Since(created).Round(10*time.Millisecond))
	p, err := getPod(ctx, pod.Name)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(managerStatus(p).RestartCount).To(BeZero(), "no restart on the way to Ready")
	// The container's output reaches its log file asynchronously.
	g.Eventually(func(g Gomega) {
		lines, err := podLog(ctx, pod.Name, false)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(logHas(lines, harness.All(harness.Message("Startup snapshot taken"), harness.KeyEquals("featureSet", "Default")))).To(BeTrue())
	}).WithTimeout(changeTimeout).WithPolling(100 * time.Millisecond).Should(Succeed())
}

// readyzReason is the body of the featuregate readiness check, read from
// the pod's address as the kubelet reads /readyz; "" when it does not
// answer.
func readyzReason(ctx context.Context, podIP string) string {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s:8081/readyz/%s", podIP, harness.ReasonCheck), nil)
	if err != nil {
		return ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}
