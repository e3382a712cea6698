package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/controllers"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// A FeatureGate change ends the container with exit code 0, and the
// kubelet starts it again at once (restartCount 1, no back-off yet). The
// new container snapshots the new feature set, says so in its log and in
// the ClusterOperator, and applies the TechPreviewNoUpgrade manifests (the
// seed's openshift-cluster-api namespace), which the first did not.
func TestFeatureGateChangeRestartsContainer(t *testing.T) {
	g := NewWithT(t)
	ctx, pod := running(t, configv1.Default, 8*time.Minute)
	c := admin(t)
	first := managerStatus(pod)
	g.Eventually(func() (bool, error) {
		lines, err := podLog(ctx, pod.Name, false)
		return logHas(lines, harness.All(harness.Message("Manifests applied"), harness.KeyEquals("featureSet", "Default"))), err
	}).WithTimeout(changeTimeout).WithPolling(time.Second).Should(BeTrue())
	err := c.Get(ctx, client.ObjectKey{Name: techPreviewNamespace}, &corev1.Namespace{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "namespace %s under Default: %v", techPreviewNamespace, err)

	harness.SetFeatureSet(t, c, "cluster", configv1.TechPreviewNoUpgrade)
	changed := time.Now()
	restarted := restartedOnce(ctx, t, pod.Name)
	t.Logf("restarted and Ready %s after the change", time.Since(changed).Round(10*time.Millisecond))
	now := managerStatus(restarted)
	g.Expect(now.ContainerID).NotTo(Equal(first.ContainerID))
	g.Expect(now.LastTerminationState.Terminated.Reason).To(Equal("Completed"))

	// The first container explained its exit; the second took the new
	// snapshot and applied what it includes.
	previous, err := podLog(ctx, pod.Name, true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(logHas(previous, harness.All(harness.Message("FeatureGate changed; requesting shutdown"), harness.KeyContains("diff", "TechPreviewNoUpgrade")))).To(BeTrue())
	g.Expect(logHas(previous, harness.Message("Graceful shutdown complete"))).To(BeTrue())
	g.Eventually(func() (bool, error) {
		lines, err := podLog(ctx, pod.Name, false)
		return logHas(lines, harness.All(harness.Message("Startup snapshot taken"), harness.KeyEquals("featureSet", "TechPreviewNoUpgrade"))) &&
			logHas(lines, harness.All(harness.Message("Manifests applied"), harness.KeyEquals("featureSet", "TechPreviewNoUpgrade"))), err
	}).WithTimeout(changeTimeout).WithPolling(time.Second).Should(BeTrue())
	g.Eventually(func() (string, error) {
		co := &configv1.ClusterOperator{}
		err := c.Get(ctx, client.ObjectKey{Name: clusterOperator}, co)
		for _, cond := range co.Status.Conditions {
			if cond.Type == configv1.OperatorAvailable {
				return cond.Message, err
			}
		}
		return "", err
	}).WithTimeout(changeTimeout).WithPolling(poll).Should(ContainSubstring("TechPreviewNoUpgrade"))
	ns := &corev1.Namespace{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: techPreviewNamespace}, ns)).To(Succeed())
	g.Expect(appliedBy(ns.ManagedFields)).To(BeTrue(), "applied by the operator: %v", ns.ManagedFields)
	// Seconds, as the API keeps both times.
	g.Expect(ns.CreationTimestamp.Time).NotTo(BeTemporally("<", now.State.Running.StartedAt.Time), "applied by the new container")

	// No crash loop: the new container stays.
	g.Consistently(func() (int32, error) {
		p, err := getPod(ctx, pod.Name)
		return managerStatus(p).RestartCount, err
	}).WithTimeout(5 * time.Second).WithPolling(poll).Should(Equal(int32(1)))
}

// readyPod waits for the operator's single pod to be Ready.
func readyPod(ctx context.Context, t *testing.T) corev1.Pod {
	t.Helper()
	pod := onePod(ctx, t)
	NewWithT(t).Eventually(func(g Gomega) {
		p, err := getPod(ctx, pod.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ready(p)).To(BeTrue())
		pod = p
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	return pod
}

// restartedOnce waits until the pod's manager container has been
// restarted once after exiting 0, and the pod is Ready again.
func restartedOnce(ctx context.Context, t *testing.T, name string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	NewWithT(t).Eventually(func(g Gomega) {
		p, err := getPod(ctx, name)
		g.Expect(err).NotTo(HaveOccurred())
		s := managerStatus(p)
		g.Expect(s.RestartCount).To(Equal(int32(1)))
		g.Expect(s.LastTerminationState.Terminated).NotTo(BeNil())
		g.Expect(s.LastTerminationState.Terminated.ExitCode).To(BeZero(), "the container exits 0 on a change")
		g.Expect(s.State.Running).NotTo(BeNil())
		g.Expect(ready(p)).To(BeTrue())
		pod = p
	}).WithTimeout(changeTimeout).WithPolling(100 * time.Millisecond).Should(Succeed())
	return pod
}

// appliedBy reports whether the operator's field manager wrote the object.
func appliedBy(fields []metav1.ManagedFieldsEntry) bool {
	for _, f := range fields {
		if strings.HasPrefix(f.Manager, controllers.FieldManager) && f.Operation == metav1.ManagedFieldsOperationApply {
			return true
		}
	}
	return false
}
