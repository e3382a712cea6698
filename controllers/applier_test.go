package controllers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/test/framework/controlplane"
)

const seedDir = "../pkg/manifest/testdata/seed"

// applyEnv is a fresh API server per test, with FeatureGate/cluster set to
// set and a running manager whose featuregate.Guard has taken its snapshot:
// the seed manifests are cluster-wide objects, and each test decides which
// of them must exist.
func applyEnv(t *testing.T, set configv1.FeatureSet) (client.Client, context.Context, *featuregate.Guard) {
	t.Helper()
	return applyEnvWith(t, set, nil)
}

// applyEnvWith is applyEnv with the given CRDs (nil: the real ones).
func applyEnvWith(t *testing.T, set configv1.FeatureSet, crds []string) (client.Client, context.Context, *featuregate.Guard) {
	t.Helper()
	e := startEnv(t, set, crds)
	return e.c, e.ctx, e.guard
}

// env is a test's API server and running manager.
type env struct {
	c     client.Client
	ctx   context.Context
	guard *featuregate.Guard
	mgr   ctrl.Manager
	cp    *controlplane.ControlPlane
}

func startEnv(t *testing.T, set configv1.FeatureSet, crds []string) *env {
	t.Helper()
	g := NewWithT(t)
	cp, err := controlplane.Start(controlplane.Options{CRDs: crds})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if err := cp.Stop(); err != nil {
			t.Error(err)
		}
	})
	c, err := controlplane.NewClient(cp.Config)
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	fg := &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: featuregate.Defaults().Name}}
	fg.Spec.FeatureSet = set
	g.Expect(c.Create(ctx, fg)).To(Succeed())
	// The release's status entry, as cluster-config-operator writes it:
	// the snapshot carries its version, which the ClusterOperator reports.
	fg.Status.FeatureGates = []configv1.FeatureGateDetails{{Version: envVersion}}
	g.Expect(c.Status().Update(ctx, fg)).To(Succeed())

	mgrCtx, stop := context.WithCancel(ctx)
	guard, err := featuregate.NewGuard(cp.Config, featuregate.Options{
		EventSource: EventSource, Registry: prometheus.NewRegistry(), Version: envVersion,
		WatchFeatureSet: true, // as main.go: inclusion reads the feature set
	})
	g.Expect(err).NotTo(HaveOccurred())
	mgr, err := guard.NewManager(ctrl.Options{
		Scheme:                 controlplane.Scheme(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true)},
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&configv1.ClusterOperator{}: {Field: fields.OneTermEqualSelector("metadata.name", "featuregate-operator")},
		}},
	})
	g.Expect(err).NotTo(HaveOccurred())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	t.Cleanup(func() {
		stop()
		g.Eventually(done).WithTimeout(time.Minute).Should(Receive(BeNil()))
	})
	g.Eventually(guard.Current).WithTimeout(time.Minute).Should(BeTrue())
	return &env{c: c, ctx: ctx, guard: guard, mgr: mgr, cp: cp}
}

// envVersion is the release version of startEnv's operator.
const envVersion = "4.11.0"

func snapshotOf(t *testing.T, guard *featuregate.Guard) featuregate.Snapshot {
	t.Helper()
	s, ok := guard.Snapshot()
	if !ok {
		t.Fatal("no snapshot")
	}
	return s
}

func newApplier(c client.Client, guard *featuregate.Guard, dir string) *Applier {
	return &Applier{
		Client: c,
		Reader: c,
		Gates:  guard,
		Status: &StatusReporter{Client: c, Reader: c, Name: "featuregate-operator", FeatureGateName: featuregate.Defaults().Name},
		Dir:    dir, ResyncPeriod: time.Second, Parallelism: 4,
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
	c, ctx, guard := applyEnv(t, configv1.TechPreviewNoUpgrade)
	a := newApplier(c, guard, seedDir)
	snap := snapshotOf(t, guard)

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
	c, ctx, guard := applyEnv(t, configv1.Default)
	a := newApplier(c, guard, seedDir)
	snap := snapshotOf(t, guard)

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
	c, ctx, guard := applyEnv(t, configv1.Default)
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
	a := newApplier(c, guard, dir)
	snap := snapshotOf(t, guard)

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
// once the FeatureGate changes (a stop is requested) nothing more is applied.
func TestApplierCorrectsDriftAndStopsOnChange(t *testing.T) {
	g := NewWithT(t)
	c, ctx, guard := applyEnv(t, configv1.Default)
	dir := t.TempDir()
	data, err := os.ReadFile(filepath.Join(seedDir, "0000_10_always_configmap.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.WriteFile(filepath.Join(dir, "0000_10_always_configmap.yaml"), data, 0o600)).To(Succeed())
	a := newApplier(c, guard, dir)
	done := make(chan error, 1)
	go func() { done <- a.Start(ctx) }()

	g.Eventually(func() bool { return exists(ctx, c, &corev1.ConfigMap{}, "default", "always") }).WithTimeout(30 * time.Second).Should(BeTrue())
	g.Expect(c.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "always"}})).To(Succeed())
	g.Eventually(func() bool { return exists(ctx, c, &corev1.ConfigMap{}, "default", "always") }).WithTimeout(30 * time.Second).Should(BeTrue())

	toTechPreview(ctx, t, c)
	g.Eventually(done).WithTimeout(30 * time.Second).Should(Receive(BeNil()))
	g.Expect(guard.StopRequested()).To(BeClosed())
	late := strings.ReplaceAll(string(data), "name: always", "name: after-stop")
	g.Expect(os.WriteFile(filepath.Join(dir, "0000_20_late.yaml"), []byte(late), 0o600)).To(Succeed())
	run := a.Apply(ctx, snapshotOf(t, guard))
	g.Expect(run.Applied).To(BeEmpty())
	g.Expect(run.Aborted).To(BeTrue())
	g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", "after-stop")).To(BeFalse())
}

// toTechPreview patches FeatureGate/cluster, as kubectl patch would, and
// then rewrites the release's status entry from it, as
// cluster-config-operator does: the guard stops the work at the first and
// lets the process exit at the second.
func toTechPreview(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	fg := &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: featuregate.Defaults().Name}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"featureSet":"TechPreviewNoUpgrade"}}`))
	NewWithT(t).Expect(c.Patch(ctx, fg, patch)).To(Succeed())
	entry := client.RawPatch(types.MergePatchType, []byte(`{"status":{"featureGates":[{"version":"`+envVersion+`","enabled":[{"name":"TechPreviewOnlyGate"}],"disabled":[]}]}}`))
	NewWithT(t).Expect(c.Status().Patch(ctx, fg, entry)).To(Succeed())
}

// The last look before acting: once the FeatureGate no longer matches the
// snapshot, nothing is applied.
func TestApplyRefusesWhenFeatureGateChanged(t *testing.T) {
	g := NewWithT(t)
	c, ctx, guard := applyEnv(t, configv1.Default)
	snap := snapshotOf(t, guard)
	toTechPreview(ctx, t, c)
	a := newApplier(c, guard, seedDir)
	g.Eventually(guard.StopRequested()).WithTimeout(30 * time.Second).Should(BeClosed())

	run := a.Apply(ctx, snap)
	g.Expect(run.Aborted).To(BeTrue())
	g.Expect(run.Applied).To(BeEmpty())
	g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", "default-only")).To(BeFalse())
	reason, requested := guard.StopReason()
	g.Expect(requested).To(BeTrue())
	// The entry's rewrite may be seen in the same read.
	g.Expect(reason).To(HavePrefix("feature set changed from Default to TechPreviewNoUpgrade"))
}

// Upgradeable fails safe: a feature set an older CRD admits but this
// operator does not know blocks upgrades, naming the value, and says so in
// an Event.
func TestUnknownFeatureSetIsNotUpgradeable(t *testing.T) {
	g := NewWithT(t)
	crds, err := controlplane.RelaxedCRDs(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	for _, set := range []configv1.FeatureSet{"Bogus", "TechPreviewNoUpgrade "} {
		t.Run(string(set), func(t *testing.T) {
			g := NewWithT(t)
			c, ctx, guard := applyEnvWith(t, set, crds)
			a := newApplier(c, guard, t.TempDir())
			snap := snapshotOf(t, guard)
			co, err := a.Status.Report(ctx, snap, a.Apply(ctx, snap))
			g.Expect(err).NotTo(HaveOccurred())
			up := condition(co, configv1.OperatorUpgradeable)
			g.Expect(up.Status).To(Equal(configv1.ConditionFalse))
			g.Expect(up.Reason).To(Equal(ReasonUnknownFeatureSet))
			g.Expect(up.Message).To(ContainSubstring(fmt.Sprintf("%q", string(set))))
		})
	}
}

func TestUpgradeableByFeatureSet(t *testing.T) {
	tests := []struct {
		set    configv1.FeatureSet
		status configv1.ConditionStatus
		reason string
	}{
		{"", configv1.ConditionTrue, ReasonAsExpected},
		{"Default", configv1.ConditionTrue, ReasonAsExpected},
		{configv1.OKD, configv1.ConditionTrue, ReasonAsExpected},
		{configv1.TechPreviewNoUpgrade, configv1.ConditionFalse, ReasonFeatureSetNoUpgrade},
		{configv1.DevPreviewNoUpgrade, configv1.ConditionFalse, ReasonFeatureSetNoUpgrade},
		{configv1.CustomNoUpgrade, configv1.ConditionFalse, ReasonFeatureSetNoUpgrade},
		{"default", configv1.ConditionFalse, ReasonUnknownFeatureSet},
		{"Bogus", configv1.ConditionFalse, ReasonUnknownFeatureSet},
	}
	for _, tt := range tests {
		t.Run(string(tt.set), func(t *testing.T) {
			g := NewWithT(t)
			snap, err := featuregate.Read(&configv1.FeatureGate{Spec: configv1.FeatureGateSpec{FeatureGateSelection: configv1.FeatureGateSelection{FeatureSet: tt.set}}}, "")
			g.Expect(err).NotTo(HaveOccurred())
			status, reason, _ := upgradeable(snap)
			g.Expect(status).To(Equal(tt.status))
			g.Expect(reason).To(Equal(tt.reason))
		})
	}
}

// A status write cut short by the stop is expected: it must not read as an
// error in the log, while the same failure in a running process must.
func TestStatusNotWrittenIsAnErrorOnlyWhileRunning(t *testing.T) {
	g := NewWithT(t)
	var lines []string
	a := &Applier{
		Status: &StatusReporter{Name: "featuregate-operator"},
		Log:    funcr.New(func(prefix, args string) { lines = append(lines, prefix+args) }, funcr.Options{}),
	}
	failed := errors.New("context canceled")

	a.Status.notWritten(context.Background(), a.log(), failed, "ClusterOperator status not reported")
	stopped, cancel := context.WithCancel(context.Background())
	cancel()
	a.Status.notWritten(stopped, a.log(), failed, "ClusterOperator status not restored")

	g.Expect(lines).To(HaveLen(2))
	g.Expect(lines[0]).To(And(ContainSubstring(`"msg"="ClusterOperator status not reported"`), ContainSubstring(`"error"="context canceled"`),
		ContainSubstring(`"clusterOperator"="featuregate-operator"`), Not(ContainSubstring(`"level"`))), "funcr: an error line has no level")
	g.Expect(lines[1]).To(And(ContainSubstring(`"msg"="ClusterOperator status not restored; stopping"`), ContainSubstring(`"error"="context canceled"`),
		ContainSubstring(`"clusterOperator"="featuregate-operator"`), ContainSubstring(`"level"=0`)), "an info line")
}
