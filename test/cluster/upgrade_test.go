package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/controllers"
	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
	"github.com/featuregate-operator/operator/test/framework/monitor"
)

// A rolling upgrade as OpenShift runs one, judged by origin's rules: the
// operator at release A (its image tag and --release-version) runs a
// TechPreviewNoUpgrade cluster; the Deployment rolls to release B before
// cluster-config-operator has written B's status.featureGates entry. The
// new pod must stay unready, saying why, while the old one stays ready and
// leader; once B's entry is written the rollout completes. Throughout, the
// monitor fails the test on Available=False, Degraded=True, no
// Progressing=True during the move, versions not ending at B, and any
// non-zero container exit; afterwards every TechPreviewNoUpgrade object
// must be there, applied by one field manager.
func TestRollingUpgrade(t *testing.T) {
	for _, replicas := range []int{1, 2} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			needNode(t)
			rollingUpgrade(t, replicas)
		})
	}
}

func rollingUpgrade(t *testing.T, replicas int) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	a, b := releases[0], releases[1]
	c := admin(t)
	installCRDs(t)
	fg := controlplane.FeatureGate(configv1.TechPreviewNoUpgrade, controlplane.StatusGates(a.version, nil, nil))
	t.Cleanup(func() { _ = c.Delete(context.Background(), fg) })
	harness.CreateFeatureGate(t, c, fg)

	// Release A, settled: every replica ready, the ClusterOperator at A, the
	// TechPreviewNoUpgrade objects applied.
	deploy(t, deployOptions{replicas: replicas, image: a.image, releaseVersion: a.version})
	var old []corev1.Pod
	g.Eventually(func(g Gomega) {
		old = pods(ctx, t)
		g.Expect(old).To(HaveLen(replicas))
		for _, p := range old {
			g.Expect(ready(p)).To(BeTrue(), "pod %s Ready", p.Name)
		}
		g.Expect(operatorVersion(ctx, c)).To(Equal(a.version))
		g.Expect(condition(ctx, c, configv1.OperatorProgressing)).To(Equal(configv1.ConditionFalse), "A settled before the move")
		g.Expect(condition(ctx, c, configv1.OperatorDegraded)).To(Equal(configv1.ConditionFalse))
		g.Expect(c.Get(ctx, client.ObjectKey{Name: techPreviewNamespace}, &corev1.Namespace{})).To(Succeed())
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())

	m, err := monitor.Start(ctx, cluster.Admin, monitor.Options{ClusterOperator: clusterOperator, Namespaces: []string{namespace}})
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { t.Logf("what the monitor saw:\n  %s", strings.Join(m.Events(), "\n  ")) }()

	// Roll to B before B's gates exist: the new pod runs, unready, and says
	// why; the old ones stay ready, one of them leader.
	kubectl(t, render(t, deployOptions{replicas: replicas, image: b.image, releaseVersion: b.version}), "apply", "--server-side", "-f", "-")
	var fresh corev1.Pod
	g.Eventually(func(g Gomega) {
		ps := podsOf(ctx, t, b.image)
		g.Expect(ps).NotTo(BeEmpty())
		fresh = ps[0]
		g.Expect(managerStatus(fresh).State.Running).NotTo(BeNil(), "the new container runs")
		g.Expect(readyzReason(ctx, fresh.Status.PodIP)).To(ContainSubstring("no status.featureGates entry for version " + b.version))
	}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		p, err := getPod(ctx, fresh.Name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(ready(p)).To(BeFalse(), "the new pod waits for its version's gates")
		g.Expect(podsOf(ctx, t, b.image)).To(HaveLen(1), "the rollout waits for the first new pod")
		for _, o := range old {
			p, err := getPod(ctx, o.Name)
			g.Expect(err).NotTo(HaveOccurred(), "the old pod %s stays", o.Name)
			g.Expect(ready(p)).To(BeTrue(), "the old pod %s stays ready", o.Name)
		}
	}).WithTimeout(5 * time.Second).WithPolling(poll).Should(Succeed())
	g.Expect(holderPod(t, old, leaseOf(ctx, t))).NotTo(BeEmpty(), "an old pod leads")
	lines, err := podLog(ctx, fresh.Name, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(logHas(lines, harness.Message("Startup snapshot taken"))).To(BeFalse(), "no snapshot without B's gates")

	// cluster-config-operator writes B's entry, keeping A's: the rollout
	// completes, and the ClusterOperator moves to B.
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(fg), fg)).To(Succeed())
	fg.Status.FeatureGates = append(fg.Status.FeatureGates, controlplane.GateDetails(b.version, nil, nil))
	g.Expect(c.Status().Update(ctx, fg)).To(Succeed())
	g.Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: deploymentName}, d)).To(Succeed())
		g.Expect(d.Status.UpdatedReplicas).To(BeEquivalentTo(replicas))
		g.Expect(d.Status.ReadyReplicas).To(BeEquivalentTo(replicas))
		g.Expect(d.Status.Replicas).To(BeEquivalentTo(replicas), "the old pods are gone")
		g.Expect(operatorVersion(ctx, c)).To(Equal(b.version))
		g.Expect(condition(ctx, c, configv1.OperatorProgressing)).To(Equal(configv1.ConditionFalse))
	}).WithTimeout(2 * podTimeout).WithPolling(poll).Should(Succeed())

	// The monitor's informer may be a step behind the GET above; a
	// violation, once recorded, stays.
	g.Expect(m.Violations()).To(BeEmpty(), "origin's rules")
	g.Eventually(func() []string { return m.Upgraded(b.version) }).WithTimeout(podTimeout).WithPolling(poll).Should(BeEmpty(), "origin's rules")
	g.Expect(m.RelatedObjects(ctx)).To(BeEmpty(), "origin's rules: related objects")
	co := &configv1.ClusterOperator{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: clusterOperator}, co)).To(Succeed())
	g.Expect(co.Status.RelatedObjects).To(ContainElement(configv1.ObjectReference{Resource: "namespaces", Name: namespace}),
		"the operator's own namespace, read from its pod, is related: must-gather collects its pods there")
	ns := &corev1.Namespace{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: techPreviewNamespace}, ns)).To(Succeed(), "TechPreviewNoUpgrade objects present after the upgrade")
	var managers []string
	for _, f := range ns.ManagedFields {
		if f.Operation == metav1.ManagedFieldsOperationApply {
			managers = append(managers, f.Manager)
		}
	}
	g.Expect(managers).To(Equal([]string{controllers.FieldManager}), "both releases apply as one field manager")
	for _, p := range podsOf(ctx, t, b.image) {
		// The container's output reaches its log file asynchronously.
		g.Eventually(func(g Gomega) {
			lines, err := podLog(ctx, p.Name, false)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(logHas(lines, harness.All(harness.Message("Startup snapshot taken"), harness.KeyEquals("version", b.version)))).To(BeTrue(), "pod %s took B's snapshot", p.Name)
			g.Expect(logHas(lines, harness.Message("Manifest not applied"))).To(BeFalse(), "no apply error (a conflict between the releases' managers) in %s", p.Name)
		}).WithTimeout(podTimeout).WithPolling(poll).Should(Succeed())
	}

	// What a support engineer asks after the upgrade: does this cluster
	// have what its feature set includes? Nothing missing, nothing extra.
	audit := harness.StartT(t, harness.Options{Name: "audit", Path: manager, Args: []string{"audit", "--from-cluster", "--kubeconfig=" + cluster.Kubeconfig,
		"--manifests-dir=" + filepath.Join(root, "config", "payload", "manifests"), "--release-version=" + b.version}})
	g.Expect(audit.WaitExit(time.Minute)).To(Equal(0), "audit after the upgrade:\n%s", audit.Log.String())
	g.Expect(audit.Log.String()).To(ContainSubstring("TechPreviewNoUpgrade"))
}

// The monitor judges what the kubelet reports: a real container that exits
// non-zero (the operator given a flag it does not know) is a failure it
// names, as origin counts it.
func TestMonitorSeesAContainerFailure(t *testing.T) {
	needNode(t)
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	c := admin(t)
	installCRDs(t)
	m, err := monitor.Start(ctx, cluster.Admin, monitor.Options{ClusterOperator: clusterOperator, Namespaces: []string{"default"}})
	g.Expect(err).NotTo(HaveOccurred())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "fails"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: container, Image: operatorImage, ImagePullPolicy: corev1.PullIfNotPresent,
				Args: []string{"--no-such-flag"},
			}},
		},
	}
	g.Expect(c.Create(ctx, pod)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), pod, client.GracePeriodSeconds(0)) })
	g.Eventually(m.Violations).WithTimeout(podTimeout).WithPolling(poll).Should(ContainElement(
		MatchRegexp(`pod default/fails container manager exited [1-9][0-9]* \(Error\): a non-zero exit is a container failure`)))
}

// podsOf lists the operator's pods that run image.
func podsOf(ctx context.Context, t *testing.T, image string) []corev1.Pod {
	t.Helper()
	var out []corev1.Pod
	for _, p := range pods(ctx, t) {
		if p.DeletionTimestamp == nil && strings.HasSuffix(p.Spec.Containers[0].Image, image) {
			out = append(out, p)
		}
	}
	return out
}

// operatorVersion is the ClusterOperator's status.versions operator; ""
// when it has none yet.
func operatorVersion(ctx context.Context, c client.Client) string {
	co := &configv1.ClusterOperator{}
	if err := c.Get(ctx, client.ObjectKey{Name: clusterOperator}, co); err != nil {
		return ""
	}
	for _, v := range co.Status.Versions {
		if v.Name == "operator" {
			return v.Version
		}
	}
	return ""
}

// condition is the status of the ClusterOperator's condition of type typ;
// "" when absent.
func condition(ctx context.Context, c client.Client, typ configv1.ClusterStatusConditionType) configv1.ConditionStatus {
	co := &configv1.ClusterOperator{}
	if err := c.Get(ctx, client.ObjectKey{Name: clusterOperator}, co); err != nil {
		return ""
	}
	for _, cond := range co.Status.Conditions {
		if cond.Type == typ {
			return cond.Status
		}
	}
	return ""
}
