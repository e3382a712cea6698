package monitor

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/test/framework/controlplane"
)

// The monitor must fail an upgrade when it should: every rule is planted
// on a real API server, and the monitor must name it; what the rules allow
// (a graceful exit 0, Progressing back to False) must not be named.
func TestMonitorCatchesWhatOriginForbids(t *testing.T) {
	g := NewWithT(t)
	cp, err := controlplane.Start(controlplane.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = cp.Stop() })
	c, err := controlplane.NewClient(cp.Config)
	g.Expect(err).NotTo(HaveOccurred())
	ctx := t.Context()

	co := &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: "planted"}}
	g.Expect(c.Create(ctx, co)).To(Succeed())
	setStatus := func(available, progressing, degraded configv1.ConditionStatus, version string, message ...string) {
		t.Helper()
		co.Status.Conditions = []configv1.ClusterOperatorStatusCondition{
			{Type: configv1.OperatorAvailable, Status: available, Reason: "Planted", LastTransitionTime: metav1.Now()},
			{Type: configv1.OperatorProgressing, Status: progressing, Reason: "Planted", Message: strings.Join(message, ""), LastTransitionTime: metav1.Now()},
			{Type: configv1.OperatorDegraded, Status: degraded, Reason: "Planted", LastTransitionTime: metav1.Now()},
		}
		co.Status.Versions = []configv1.OperandVersion{{Name: "operator", Version: version}}
		g.Expect(c.Status().Update(ctx, co)).To(Succeed())
	}
	// Progressing=True naming the new version before the monitor starts
	// proves nothing about the move it watches.
	setStatus(configv1.ConditionTrue, configv1.ConditionTrue, configv1.ConditionFalse, "4.21.0", "Moving to 4.22.0 (left over)")

	m, err := Start(ctx, cp.Config, Options{ClusterOperator: "planted", Namespaces: []string{"default"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m.Violations()).To(BeEmpty(), "a healthy start")
	g.Expect(m.Upgraded("4.22.0")).To(ConsistOf(
		ContainSubstring("never went Progressing=True naming 4.22.0"),
		ContainSubstring(`versions operator="4.21.0", not "4.22.0"`),
	))

	// A move as origin wants it: Progressing up (a retry naming no version
	// does not count) and down, the version moved.
	setStatus(configv1.ConditionTrue, configv1.ConditionFalse, configv1.ConditionFalse, "4.21.0")
	setStatus(configv1.ConditionTrue, configv1.ConditionTrue, configv1.ConditionFalse, "4.21.0", "Retrying")
	g.Consistently(func() []string { return m.Upgraded("4.22.0") }).WithTimeout(time.Second).Should(ContainElement(ContainSubstring("never went Progressing=True naming 4.22.0")))
	setStatus(configv1.ConditionTrue, configv1.ConditionTrue, configv1.ConditionFalse, "4.21.0", "Moving from version 4.21.0 to 4.22.0")
	setStatus(configv1.ConditionTrue, configv1.ConditionFalse, configv1.ConditionFalse, "4.22.0")
	g.Eventually(func() []string { return m.Upgraded("4.22.0") }).WithTimeout(10 * time.Second).Should(BeEmpty())

	// A container that stops gracefully is not a failure; one that exits 1 is.
	exited(t, c, "graceful", 0)
	exited(t, c, "crashed", 1)
	g.Eventually(m.Violations).WithTimeout(10 * time.Second).Should(ConsistOf(
		ContainSubstring("pod default/crashed container manager exited 1"),
	))

	// Available False for a moment, then back: seen, though it did not last.
	setStatus(configv1.ConditionFalse, configv1.ConditionFalse, configv1.ConditionFalse, "4.22.0")
	setStatus(configv1.ConditionTrue, configv1.ConditionFalse, configv1.ConditionTrue, "4.22.0")
	g.Eventually(m.Violations).WithTimeout(10 * time.Second).Should(HaveLen(3))
	v := strings.Join(m.Violations(), "\n")
	g.Expect(v).To(ContainSubstring("Available=False (Planted: ): Available must never leave True"))
	g.Expect(v).To(ContainSubstring("went Degraded=True"))
	g.Expect(m.Events()).NotTo(BeEmpty())

	// Related objects as origin wants them: a namespace and an object that
	// is not one, each existing; then a reference to a namespace that is
	// gone and one to a resource nobody serves.
	g.Expect(m.RelatedObjects(ctx)).To(ConsistOf(ContainSubstring("relates no namespace"), ContainSubstring("relates no object but namespaces")))
	co.Status.RelatedObjects = []configv1.ObjectReference{
		{Resource: "namespaces", Name: "default"},
		{Group: configv1.GroupName, Resource: "clusteroperators", Name: "planted"},
	}
	g.Expect(c.Status().Update(ctx, co)).To(Succeed())
	g.Eventually(func() []string { return m.RelatedObjects(ctx) }).WithTimeout(10 * time.Second).Should(BeEmpty())
	co.Status.RelatedObjects = append(co.Status.RelatedObjects,
		configv1.ObjectReference{Resource: "namespaces", Name: "gone"},
		configv1.ObjectReference{Group: "example.com", Resource: "widgets", Namespace: "default", Name: "w"})
	g.Expect(c.Status().Update(ctx, co)).To(Succeed())
	g.Eventually(func() []string { return m.RelatedObjects(ctx) }).WithTimeout(10 * time.Second).Should(ConsistOf(
		ContainSubstring(`relates namespaces gone: namespaces "gone" not found`),
		ContainSubstring("relates widgets.example.com default/w: resource not served"),
	))
}

// exited plants a pod whose container terminated with code, as a kubelet
// reports it.
func exited(t *testing.T, c client.Client, name string, code int32) {
	t.Helper()
	g := NewWithT(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec:       corev1.PodSpec{NodeName: "planted", Containers: []corev1.Container{{Name: "manager", Image: "planted"}}},
	}
	g.Expect(c.Create(t.Context(), pod)).To(Succeed())
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{
		Name:  "manager",
		Image: "planted",
		State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: code, Reason: "Planted", ContainerID: "containerd://" + name,
		}},
	}}
	g.Expect(c.Status().Update(t.Context(), pod)).To(Succeed())
}
