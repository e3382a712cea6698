package controllers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/internal/controlplane"
	"github.com/featuregate-operator/operator/pkg/featuregate"
)

const seedDir = "../pkg/manifest/testdata/seed"

// applyEnv is a fresh API server per test: the seed manifests are
// cluster-wide objects, and each test decides which of them must exist.
func applyEnv(t *testing.T) (client.Client, context.Context) {
	t.Helper()
	cp, err := controlplane.Start(controlplane.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	c, err := controlplane.NewClient(cp.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c, ctx
}

func snapshotOf(t *testing.T, set configv1.FeatureSet) featuregate.Snapshot {
	t.Helper()
	s, err := featuregate.New(controlplane.FeatureGate(set), featuregate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newApplier(c client.Client, dir string) *Applier {
	return &Applier{
		Client:  c,
		Stopper: featuregate.NewStopper(func() {}),
		Status:  &StatusReporter{Client: c, Reader: c, Name: "featuregate-operator", Version: "4.11.0"},
		Dir:     dir, ResyncPeriod: time.Second, Parallelism: 4,
	}
}

func exists(ctx context.Context, c client.Client, obj client.Object, ns, name string) bool {
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	if err != nil && !apierrors.IsNotFound(err) {
		panic(err)
	}
	return err == nil
}

func condition(co *configv1.ClusterOperator, t configv1.ClusterStatusConditionType) configv1.ClusterOperatorStatusCondition {
	for _, c := range co.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return configv1.ClusterOperatorStatusCondition{}
}

// The seed's harm, undone: on TechPreviewNoUpgrade the cluster-api
// namespace is applied, and the Default-only object is not.
func TestApplyTechPreviewNoUpgrade(t *testing.T) {
	g := NewWithT(t)
	c, ctx := applyEnv(t)
	a := newApplier(c, seedDir)
	snap := snapshotOf(t, configv1.TechPreviewNoUpgrade)

	run := a.Apply(ctx, snap)
	g.Expect(run.Failed).To(BeEmpty())
	g.Expect(run.Invalid).To(BeEmpty())
	g.Expect(run.Applied).To(HaveLen(2))
	g.Expect(run.Excluded).To(Equal(1))
	g.Expect(exists(ctx, c, &corev1.Namespace{}, "", "openshift-cluster-api")).To(BeTrue())
	g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", "always")).To(BeTrue())
	g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", "default-only")).To(BeFalse())

	ns := &corev1.Namespace{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "openshift-cluster-api"}, ns)).To(Succeed())
	g.Expect(ns.ManagedFields).NotTo(BeEmpty())
	g.Expect(ns.ManagedFields[0].Manager).To(Equal(FieldManager))
	g.Expect(ns.ManagedFields[0].Operation).To(Equal(metav1.ManagedFieldsOperationApply))

	co, err := a.Status.Report(ctx, snap, run)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "featuregate-operator"}, co)).To(Succeed())
	available := condition(co, configv1.OperatorAvailable)
	g.Expect(available.Status).To(Equal(configv1.ConditionTrue))
	g.Expect(available.Message).To(ContainSubstring("at 4.11.0 with startup feature set TechPreviewNoUpgrade"))
	g.Expect(condition(co, configv1.OperatorDegraded).Status).To(Equal(configv1.ConditionFalse))
	g.Expect(condition(co, configv1.OperatorProgressing).Status).To(Equal(configv1.ConditionFalse))
	upgradeable := condition(co, configv1.OperatorUpgradeable)
	g.Expect(upgradeable.Status).To(Equal(configv1.ConditionFalse))
	g.Expect(upgradeable.Reason).To(Equal(ReasonFeatureSetNoUpgrade))
	g.Expect(co.Status.Versions).To(ConsistOf(configv1.OperandVersion{Name: "operator", Version: "4.11.0"}))
	g.Expect(co.Status.RelatedObjects).To(ContainElements(
		configv1.ObjectReference{Group: "config.openshift.io", Resource: "featuregates", Name: "cluster"},
		configv1.ObjectReference{Resource: "namespaces", Name: "openshift-cluster-api"},
	))
}

func TestApplyDefault(t *testing.T) {
	g := NewWithT(t)
	c, ctx := applyEnv(t)
	a := newApplier(c, seedDir)
	snap := snapshotOf(t, configv1.Default)

	run := a.Apply(ctx, snap)
	g.Expect(run.Failed).To(BeEmpty())
	g.Expect(exists(ctx, c, &corev1.Namespace{}, "", "openshift-cluster-api")).To(BeFalse())
	g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", "always")).To(BeTrue())
	g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", "default-only")).To(BeTrue())

	co, err := a.Status.Report(ctx, snap, run)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(condition(co, configv1.OperatorUpgradeable).Status).To(Equal(configv1.ConditionTrue))
	g.Expect(condition(co, configv1.OperatorAvailable).Message).To(ContainSubstring("startup feature set Default"))
}

// Bad input is named and loses nothing else.
func TestApplyBadManifestsDegradeButOthersApply(t *testing.T) {
	g := NewWithT(t)
	c, ctx := applyEnv(t)
	dir := t.TempDir()
	entries, err := os.ReadDir("../pkg/manifest/testdata/bad")
	g.Expect(err).NotTo(HaveOccurred())
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join("../pkg/manifest/testdata/bad", e.Name()))
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(os.WriteFile(filepath.Join(dir, e.Name()), data, 0o600)).To(Succeed())
	}
	unknown := "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\n  namespace: default\n"
	g.Expect(os.WriteFile(filepath.Join(dir, "0000_70_unknown_widget.yaml"), []byte(unknown), 0o600)).To(Succeed())
	a := newApplier(c, dir)
	snap := snapshotOf(t, configv1.Default)

	run := a.Apply(ctx, snap)
	g.Expect(run.Invalid).To(HaveLen(2))
	g.Expect(run.Failed).To(HaveLen(1))
	g.Expect(run.Failed[0].Error()).To(ContainSubstring("0000_70_unknown_widget.yaml[0] Widget"))
	for _, name := range []string{"good-before", "good-after", "good"} {
		g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", name)).To(BeTrue(), name)
	}

	co, err := a.Status.Report(ctx, snap, run)
	g.Expect(err).NotTo(HaveOccurred())
	degraded := condition(co, configv1.OperatorDegraded)
	g.Expect(degraded.Status).To(Equal(configv1.ConditionTrue))
	g.Expect(degraded.Reason).To(Equal(ReasonManifestsFailed))
	g.Expect(degraded.Message).To(And(ContainSubstring("0000_40_malformed.yaml"), ContainSubstring("0000_50_bad.yaml[1]"), ContainSubstring("0000_70_unknown_widget.yaml")))
	g.Expect(condition(co, configv1.OperatorProgressing).Status).To(Equal(configv1.ConditionTrue))
	g.Expect(condition(co, configv1.OperatorAvailable).Status).To(Equal(configv1.ConditionTrue))
}

// Level-triggered: a deleted object comes back with the next resync, and
// once a stop is requested nothing more is applied.
func TestApplierCorrectsDriftAndStopsOnRequest(t *testing.T) {
	g := NewWithT(t)
	c, ctx := applyEnv(t)
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(seedDir, "0000_10_always_configmap.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "0000_10_always_configmap.yaml"), data, 0o600)).To(Succeed())
	a := newApplier(c, dir)
	snap := snapshotOf(t, configv1.Default)
	a.Snapshots = fixedSnapshot{snap}
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx) }()

	g.Eventually(func() bool { return exists(ctx, c, &corev1.ConfigMap{}, "default", "always") }).WithTimeout(30 * time.Second).Should(BeTrue())
	g.Expect(c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "always"}})).To(Succeed())
	g.Eventually(func() bool { return exists(ctx, c, &corev1.ConfigMap{}, "default", "always") }).WithTimeout(30 * time.Second).Should(BeTrue())

	a.Stopper.Stop("test")
	g.Eventually(done).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
	late := strings.ReplaceAll(string(data), "name: always", "name: after-stop")
	g.Expect(os.WriteFile(filepath.Join(dir, "0000_20_late.yaml"), []byte(late), 0o600)).To(Succeed())
	g.Expect(a.Apply(ctx, snap).Applied).To(BeEmpty())
	g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", "after-stop")).To(BeFalse())
}

// The last look before acting: when the live FeatureGate no longer matches
// the snapshot, nothing is applied and a stop is requested.
func TestApplyRefusesWhenFeatureGateChanged(t *testing.T) {
	g := NewWithT(t)
	c, ctx := applyEnv(t)
	fg := controlplane.FeatureGate(configv1.TechPreviewNoUpgrade)
	g.Expect(c.Create(ctx, fg)).To(Succeed())
	a := newApplier(c, seedDir)
	a.Live = c
	stopper := featuregate.NewStopper(func() {})
	a.Stopper = stopper

	run := a.Apply(ctx, snapshotOf(t, configv1.Default))
	g.Expect(run.Aborted).To(BeTrue())
	g.Expect(run.Applied).To(BeEmpty())
	g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", "default-only")).To(BeFalse())
	reason, requested := stopper.Reason()
	g.Expect(requested).To(BeTrue())
	g.Expect(reason).To(Equal("feature set changed from Default to TechPreviewNoUpgrade"))
}

type fixedSnapshot struct{ s featuregate.Snapshot }

func (f fixedSnapshot) Snapshot() (featuregate.Snapshot, bool) { return f.s, true }
