package deploy

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/api/v1alpha1"
	"github.com/featuregate-operator/operator/controllers"
	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// The generated RBAC is enough, and no more: the real binary, authenticated
// only by a TokenRequest token of the rendered ServiceAccount (no client
// certificate, no impersonation), bound only by the rendered roles, takes its
// snapshot, wins the lease, applies the seed manifests the snapshot
// includes, writes ClusterOperator status, records Events, and stops on a
// FeatureGate change; and the same identity may neither write the
// FeatureGate nor read Secrets.
func TestGeneratedRBACRunsOperator(t *testing.T) {
	g := NewWithT(t)
	cp, admin := startControlPlane(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	sa := installOperatorRBAC(ctx, t, admin)
	fg := createFeatureGate(t, admin, configv1.TechPreviewNoUpgrade, []string{"GateA"}, []string{"GateB"})
	saConfig := tokenConfig(ctx, t, cp, sa)
	health := harness.FreeAddr(t)
	op := startOperator(t, health,
		"--kubeconfig="+harness.Kubeconfig(t, saConfig),
		"--release-version="+testVersion,
		"--manifests-dir="+filepath.Join(root, "pkg", "manifest", "testdata", "seed"),
		"--leader-elect",
		"--leader-election-namespace="+sa.namespace,
		"--metrics-bind-address=0",
		"--health-probe-bind-address="+health,
		"--graceful-shutdown-timeout=10s",
	)
	g.Expect(op.ReadyWithin(90 * time.Second)).To(Succeed())
	g.Expect(op.Logged(harness.All(harness.Message("Startup snapshot taken"), harness.KeyEquals("featureSet", "TechPreviewNoUpgrade")))).To(Succeed())

	// Status: the ClusterOperator, created and written by the operator.
	co := &configv1.ClusterOperator{}
	g.Eventually(func(g Gomega) {
		g.Expect(admin.Get(ctx, client.ObjectKey{Name: "featuregate-operator"}, co)).To(Succeed())
		g.Expect(co.Status.Conditions).To(ContainElement(And(
			HaveField("Type", configv1.OperatorAvailable),
			HaveField("Status", configv1.ConditionTrue),
			HaveField("Message", ContainSubstring("startup feature set TechPreviewNoUpgrade; 2 manifests applied")),
		)))
	}).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	g.Expect(co.Status.Conditions).To(ContainElement(And(HaveField("Type", configv1.OperatorDegraded), HaveField("Status", configv1.ConditionFalse))))
	g.Expect(co.Status.Conditions).To(ContainElement(And(HaveField("Type", configv1.OperatorUpgradeable), HaveField("Status", configv1.ConditionFalse))))

	// Apply: what TechPreviewNoUpgrade includes exists, applied by the
	// operator's field manager; what only Default includes does not.
	ns := &corev1.Namespace{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Name: "openshift-cluster-api"}, ns)).To(Succeed())
	always := &corev1.ConfigMap{}
	g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: "default", Name: "always"}, always)).To(Succeed())
	g.Expect(always.ManagedFields).To(ContainElement(HaveField("Manager", controllers.FieldManager)))
	err := admin.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default-only"}, &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "default-only must not be applied under TechPreviewNoUpgrade: %v", err)

	// Leader election: the operator holds the lease in its namespace.
	leaseKey := client.ObjectKey{Namespace: sa.namespace, Name: v1alpha1.NewDefaultOperatorConfig().LeaderElection.ResourceName}
	lease := &coordinationv1.Lease{}
	g.Expect(admin.Get(ctx, leaseKey, lease)).To(Succeed())
	g.Expect(lease.Spec.HolderIdentity).To(HaveValue(Not(BeEmpty())))

	// Events: the startup snapshot was recorded (events.k8s.io/v1).
	g.Eventually(func(g Gomega) {
		events := &eventsv1.EventList{}
		g.Expect(admin.List(ctx, events)).To(Succeed())
		g.Expect(events.Items).To(ContainElement(And(
			HaveField("Reason", "StartupSnapshot"),
			HaveField("Regarding.Name", "cluster"),
		)))
	}).WithTimeout(30 * time.Second).WithPolling(250 * time.Millisecond).Should(Succeed())

	// Reconcile: a change of the gates for our version stops the operator
	// cleanly (exit 0), releasing the lease on the way out.
	patch := client.MergeFrom(fg.DeepCopy())
	fg.Status.FeatureGates[0].Enabled = controlplane.GateAttributes("GateA", "GateB")
	fg.Status.FeatureGates[0].Disabled = controlplane.GateAttributes()
	g.Expect(admin.Status().Patch(ctx, fg, patch)).To(Succeed())
	g.Expect(op.WaitExit(time.Minute)).To(Equal(0))
	change := "gate GateB disabled -> enabled in status for version " + testVersion
	g.Expect(op.Logged(harness.All(harness.Message("FeatureGate changed; requesting shutdown"), harness.KeyContains("diff", change)))).To(Succeed())
	g.Expect(op.Logged(harness.All(harness.Message("Graceful shutdown complete"), harness.KeyEquals("reason", change)))).To(Succeed())
	g.Expect(admin.Get(ctx, leaseKey, lease)).To(Succeed())
	g.Expect(lease.Spec.HolderIdentity).To(Or(BeNil(), HaveValue(BeEmpty())), "the lease is released on shutdown")
	// Nothing the operator did along the way was refused.
	g.Expect(strings.ToLower(op.Log.String())).NotTo(ContainSubstring("forbidden"))

	// Least privilege: the same identity cannot write the FeatureGate or
	// read Secrets.
	c, err := controlplane.NewClient(saConfig)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "cluster"}, &configv1.FeatureGate{})).To(Succeed(), "the identity reads the FeatureGate")
	err = c.Patch(ctx, &configv1.FeatureGate{ObjectMeta: fg.ObjectMeta}, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`)))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "patch FeatureGate as %s: %v", sa, err)
	err = c.Status().Patch(ctx, &configv1.FeatureGate{ObjectMeta: fg.ObjectMeta}, client.RawPatch(types.MergePatchType, []byte(`{"status":{"featureGates":[]}}`)))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "patch FeatureGate status as %s: %v", sa, err)
	err = c.List(ctx, &corev1.SecretList{}, client.InNamespace(sa.namespace))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "list Secrets as %s: %v", sa, err)
	err = c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "any"}, &corev1.Secret{})
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "get a Secret as %s: %v", sa, err)

	// Nor write anything the payload does not hold (issue: the shipped role
	// once let it patch every CRD, any ConfigMap, any ClusterOperator's
	// status, and create Deployments anywhere).
	merge := client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"touched":"yes"}}}`))
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	crd.SetName("featuregates.config.openshift.io")
	err = c.Patch(ctx, crd, merge)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "patch the FeatureGate CRD as %s: %v", sa, err)
	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "always"}}
	g.Expect(admin.Create(ctx, other)).To(Succeed())
	err = c.Patch(ctx, other, merge)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "patch a ConfigMap of another namespace, of a payload name, as %s: %v", sa, err)
	err = c.Patch(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "not-in-payload"}}, merge)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "patch a ConfigMap the payload does not hold as %s: %v", sa, err)
	otherCO := &configv1.ClusterOperator{ObjectMeta: metav1.ObjectMeta{Name: "kube-apiserver"}}
	g.Expect(admin.Create(ctx, otherCO)).To(Succeed())
	err = c.Status().Patch(ctx, otherCO, client.RawPatch(types.MergePatchType, []byte(`{"status":{"conditions":[{"type":"Available","status":"False","reason":"Spoofed","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`)))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "patch another ClusterOperator's status as %s: %v", sa, err)
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "intruder"},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}},
		}}
	err = c.Create(ctx, dep)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "create a Deployment in kube-system as %s: %v", sa, err)
}
