package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/featuregate-operator/operator/test/framework/harness"
)

// Two replicas, leader election on as shipped: both become Ready (the
// snapshot is every replica's), only the leader applies, a change restarts
// both, and the lease goes to a new holder without waiting out its
// duration (the old leader releases it as it stops).
func TestLeaderElectionTwoReplicas(t *testing.T) {
	needNode(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	installCRDs(t)
	createFeatureGate(t, configv1.Default)
	deploy(t, deployOptions{replicas: 2})

	var two []corev1.Pod
	g.Eventually(func(g Gomega) {
		two = pods(ctx, t)
		g.Expect(two).To(HaveLen(2))
		for _, p := range two {
			g.Expect(ready(p)).To(BeTrue(), "pod %s Ready", p.Name)
		}
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())

	lease := leaseOf(ctx, t)
	leader := holderPod(t, two, lease)
	onlyLeaderApplies(ctx, t, two, leader, "Default")

	harness.SetFeatureSet(t, admin(t), "cluster", configv1.TechPreviewNoUpgrade)
	changed := time.Now()
	var handedOver time.Duration
	g.Eventually(func() bool {
		l := leaseOf(ctx, t)
		if h := ptrString(l.Spec.HolderIdentity); h != "" && h != ptrString(lease.Spec.HolderIdentity) {
			handedOver = time.Since(changed)
			return true
		}
		return false
	}).WithTimeout(changeTimeout).WithPolling(100 * time.Millisecond).Should(BeTrue())
	duration := time.Duration(*lease.Spec.LeaseDurationSeconds) * time.Second
	t.Logf("lease handed over %s after the change (lease duration %s)", handedOver.Round(10*time.Millisecond), duration)
	g.Expect(handedOver).To(BeNumerically("<", duration/2), "the lease was released, not left to expire")

	for i, p := range two {
		two[i] = restartedOnce(ctx, t, p.Name)
	}
	onlyLeaderApplies(ctx, t, two, holderPod(t, two, leaseOf(ctx, t)), "TechPreviewNoUpgrade")
}

// leaseOf is the operator's leader election Lease (the only one in its
// namespace).
func leaseOf(ctx context.Context, t *testing.T) coordinationv1.Lease {
	t.Helper()
	var lease coordinationv1.Lease
	NewWithT(t).Eventually(func(g Gomega) {
		list, err := cluster.Clientset.CoordinationV1().Leases(namespace).List(ctx, metav1.ListOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(list.Items).To(HaveLen(1))
		lease = list.Items[0]
		g.Expect(lease.Spec.LeaseDurationSeconds).NotTo(BeNil())
	}).WithTimeout(changeTimeout).WithPolling(poll).Should(Succeed())
	return lease
}

// holderPod is the pod whose manager holds the lease (controller-runtime's
// identity is the host name, the pod's name, and a unique suffix).
func holderPod(t *testing.T, pods []corev1.Pod, lease coordinationv1.Lease) string {
	t.Helper()
	holder := ptrString(lease.Spec.HolderIdentity)
	for _, p := range pods {
		if strings.HasPrefix(holder, p.Name+"_") {
			return p.Name
		}
	}
	t.Fatalf("lease holder %q is none of the pods", holder)
	return ""
}

// onlyLeaderApplies waits for the leader's current container to apply the
// manifests of set, and checks that the other replica's does not.
func onlyLeaderApplies(ctx context.Context, t *testing.T, pods []corev1.Pod, leader, set string) {
	t.Helper()
	g := NewWithT(t)
	applied := harness.All(harness.Message("Manifests applied"), harness.KeyEquals("featureSet", set))
	g.Eventually(func() (bool, error) {
		lines, err := podLog(ctx, leader, false)
		return logHas(lines, applied), err
	}).WithTimeout(changeTimeout).WithPolling(time.Second).Should(BeTrue(), "the leader %s applies", leader)
	for _, p := range pods {
		if p.Name == leader {
			continue
		}
		g.Consistently(func() (bool, error) {
			lines, err := podLog(ctx, p.Name, false)
			return logHas(lines, harness.Message("Manifests applied")), err
		}).WithTimeout(3*time.Second).WithPolling(time.Second).Should(BeFalse(), "the follower %s applies nothing", p.Name)
	}
}

func ptrString(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
