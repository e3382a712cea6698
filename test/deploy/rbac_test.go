package deploy

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/api/v1alpha1"
	"github.com/featuregate-operator/operator/controllers"
	"github.com/featuregate-operator/operator/internal/controlplane"
	"github.com/featuregate-operator/operator/internal/testharness"
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
	health := testharness.FreeAddr(t)
	op := startOperator(t, health,
		"--kubeconfig="+testharness.Kubeconfig(t, saConfig),
		"--release-version="+testVersion,
		"--manifests-dir="+filepath.Join(root, "pkg", "manifest", "testdata", "seed"),
		"--leader-elect",
		"--leader-election-namespace="+sa.namespace,
		"--metrics-bind-address=0",
		"--health-probe-bind-address="+health,
		"--graceful-shutdown-timeout=10s",
	)
	g.Expect(op.ReadyWithin(90 * time.Second)).To(Succeed())
	g.Expect(op.Log.String()).To(ContainSubstring("startup feature set TechPreviewNoUpgrade"))

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
	out := op.Log.String()
	g.Expect(out).To(ContainSubstring("gate GateB disabled -> enabled in status for version " + testVersion + "; requesting shutdown"))
	g.Expect(out).To(ContainSubstring("graceful shutdown complete: gate GateB disabled -> enabled"))
	g.Expect(admin.Get(ctx, leaseKey, lease)).To(Succeed())
	g.Expect(lease.Spec.HolderIdentity).To(Or(BeNil(), HaveValue(BeEmpty())), "the lease is released on shutdown")
	// Nothing the operator did along the way was refused.
	g.Expect(strings.ToLower(out)).NotTo(ContainSubstring("forbidden"))

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
}
