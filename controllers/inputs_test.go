package controllers

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/internal/clusterinputs"
	"github.com/featuregate-operator/operator/test/framework/controlplane"
	"github.com/featuregate-operator/operator/test/framework/harness"
)

// configMap is a ConfigMap manifest in default with the given annotations.
func configMap(name string, annotations ...string) string {
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: default\n"
	if len(annotations) > 0 {
		doc += "  annotations:\n"
		for i := 0; i+1 < len(annotations); i += 2 {
			doc += "    " + annotations[i] + ": \"" + annotations[i+1] + "\"\n"
		}
	}
	return doc + "data:\n  from: manifest\n"
}

// clusterVersion creates ClusterVersion/version with the given known and
// enabled capabilities and overrides.
func clusterVersion(ctx context.Context, t *testing.T, c client.Client, known, enabled []configv1.ClusterVersionCapability, overrides ...configv1.ComponentOverride) *configv1.ClusterVersion {
	t.Helper()
	g := NewWithT(t)
	cv := &configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: clusterinputs.ClusterVersionName},
		Spec: configv1.ClusterVersionSpec{ClusterID: "2b4c4e5a-0f7c-4f4e-9d8e-0a1b2c3d4e5f", Overrides: overrides}}
	g.Expect(c.Create(ctx, cv)).To(Succeed())
	cv.Status = configv1.ClusterVersionStatus{
		Desired:      configv1.Release{Version: "4.11.0"},
		Capabilities: configv1.ClusterVersionCapabilitiesStatus{KnownCapabilities: known, EnabledCapabilities: enabled},
	}
	g.Expect(c.Status().Update(ctx, cv)).To(Succeed())
	return cv
}

// Capabilities come from the live ClusterVersion: unknown or disabled
// excludes; one enabled later is applied by the next run, with no restart.
func TestApplyFiltersByCapabilities(t *testing.T) {
	g := NewWithT(t)
	c, ctx, guard := applyEnv(t, configv1.Default)
	known := []configv1.ClusterVersionCapability{configv1.ClusterVersionCapabilityConsole, configv1.ClusterVersionCapabilityInsights}
	cv := clusterVersion(ctx, t, c, known, []configv1.ClusterVersionCapability{configv1.ClusterVersionCapabilityInsights})
	dir := harness.WriteFiles(t, map[string]string{
		"0000_10_insights.yaml": configMap("insights", "capability.openshift.io/name", "Insights"),
		"0000_10_console.yaml":  configMap("console", "capability.openshift.io/name", "Console"),
		"0000_10_both.yaml":     configMap("both", "capability.openshift.io/name", "Console+Insights"),
		"0000_10_unknown.yaml":  configMap("unknown", "capability.openshift.io/name", "NoSuchCapability"),
		"0000_10_none.yaml":     configMap("no-capability"),
	})
	a := newApplier(c, guard, dir)
	snap := snapshotOf(t, guard)

	run := a.Apply(ctx, snap)
	g.Expect(run.Failed).To(BeEmpty())
	g.Expect(run.Inputs.Filter()).To(Equal("on: 1 of 2 known capabilities enabled"))
	for name, want := range map[string]bool{"insights": true, "no-capability": true, "console": false, "both": false, "unknown": false} {
		g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", name)).To(Equal(want), name)
	}

	cv.Status.Capabilities.EnabledCapabilities = known
	g.Expect(c.Status().Update(ctx, cv)).To(Succeed())
	run = a.Apply(ctx, snap)
	g.Expect(run.Failed).To(BeEmpty())
	g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", "console")).To(BeTrue())
	g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", "both")).To(BeTrue())
	g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", "unknown")).To(BeFalse())

	co, err := a.Status.Report(ctx, snap, run)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(condition(co, configv1.OperatorAvailable).Message).To(ContainSubstring("capability filter on: 2 of 2"))
}

// Without a ClusterVersion (not served, or served but absent) the filter is
// off, and the ClusterOperator says why.
func TestApplyCapabilityFilterOff(t *testing.T) {
	all, err := controlplane.OpenShiftCRDs()
	if err != nil {
		t.Fatal(err)
	}
	withoutCV := slices.DeleteFunc(slices.Clone(all), func(f string) bool { return filepath.Base(f) == controlplane.ClusterVersionCRD })
	for name, tt := range map[string]struct {
		crds []string
		off  string
	}{
		"not served": {withoutCV, "off: ClusterVersion is not served"},
		"absent":     {all, "off: ClusterVersion version does not exist"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c, ctx, guard := applyEnvWith(t, configv1.Default, tt.crds)
			dir := harness.WriteFiles(t, map[string]string{"0000_10_console.yaml": configMap("console", "capability.openshift.io/name", "Console")})
			a := newApplier(c, guard, dir)
			snap := snapshotOf(t, guard)
			run := a.Apply(ctx, snap)
			g.Expect(run.Failed).To(BeEmpty())
			g.Expect(run.Inputs.Filter()).To(Equal(tt.off))
			g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", "console")).To(BeTrue())
			co, err := a.Status.Report(ctx, snap, run)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(condition(co, configv1.OperatorAvailable).Message).To(ContainSubstring("capability filter " + tt.off))
		})
	}
}

// The exclude identifier and the ClusterVersion's unmanaged overrides
// exclude; a managed override does not.
func TestApplyExcludeIdentifierAndOverrides(t *testing.T) {
	g := NewWithT(t)
	c, ctx, guard := applyEnv(t, configv1.Default)
	clusterVersion(ctx, t, c, nil, nil,
		configv1.ComponentOverride{Kind: "ConfigMap", Group: "", Namespace: "default", Name: "unmanaged", Unmanaged: true},
		configv1.ComponentOverride{Kind: "ConfigMap", Group: "", Namespace: "default", Name: "managed", Unmanaged: false})
	dir := harness.WriteFiles(t, map[string]string{
		"0000_10_excluded.yaml":  configMap("excluded", "exclude.release.openshift.io/hypershift", "true"),
		"0000_10_other-id.yaml":  configMap("other-id", "exclude.release.openshift.io/other", "true"),
		"0000_10_unmanaged.yaml": configMap("unmanaged"),
		"0000_10_managed.yaml":   configMap("managed"),
	})
	a := newApplier(c, guard, dir)
	a.ExcludeIdentifier = "hypershift"
	run := a.Apply(ctx, snapshotOf(t, guard))
	g.Expect(run.Failed).To(BeEmpty())
	g.Expect(run.Excluded).To(Equal(2))
	for name, want := range map[string]bool{"excluded": false, "other-id": true, "unmanaged": false, "managed": true} {
		g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", name)).To(Equal(want), name)
	}
}

// Deletion: an object so annotated is deleted (and its absence is success
// next time); an object not so annotated is never deleted.
func TestApplyDeletesOnlyWhatIsMarked(t *testing.T) {
	g := NewWithT(t)
	c, ctx, guard := applyEnv(t, configv1.Default)
	for _, name := range []string{"doomed", "bystander"} {
		g.Expect(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}})).To(Succeed())
	}
	dir := harness.WriteFiles(t, map[string]string{
		"0000_10_doomed.yaml":        configMap("doomed", "release.openshift.io/delete", "true"),
		"0000_10_doomed-absent.yaml": configMap("never-existed", "release.openshift.io/delete", "true"),
		"0000_10_tech-only.yaml":     configMap("bystander", "release.openshift.io/delete", "true", "release.openshift.io/feature-set", "TechPreviewNoUpgrade"),
		"0000_20_kept.yaml":          configMap("kept"),
	})
	a := newApplier(c, guard, dir)
	snap := snapshotOf(t, guard)
	for range 2 {
		run := a.Apply(ctx, snap)
		g.Expect(run.Failed).To(BeEmpty())
		g.Expect(run.Deleted).To(HaveLen(2))
		g.Expect(run.Applied).To(HaveLen(1))
		// Foreground: the garbage collector, which envtest does not run,
		// would remove it once its dependents are gone.
		g.Expect(deleting(ctx, c, "doomed")).To(BeTrue())
		g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", "bystander")).To(BeTrue(), "its delete is for another feature set")
		g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", "kept")).To(BeTrue())
	}
	co, err := a.Status.Report(ctx, snap, a.Apply(ctx, snap))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(condition(co, configv1.OperatorAvailable).Message).To(ContainSubstring("2 deleted"))
}

// deleting is true when the ConfigMap is gone or being deleted.
func deleting(ctx context.Context, c client.Client, name string) bool {
	cm := &corev1.ConfigMap{}
	if !exists(ctx, c, cm, "default", name) {
		return true
	}
	return cm.DeletionTimestamp != nil
}

// Create-only: created when absent, then left as found: an edit survives
// every later run.
func TestApplyCreateOnlyKeepsEdits(t *testing.T) {
	g := NewWithT(t)
	c, ctx, guard := applyEnv(t, configv1.Default)
	dir := harness.WriteFiles(t, map[string]string{"0000_10_seeded.yaml": configMap("seeded", "release.openshift.io/create-only", "true")})
	a := newApplier(c, guard, dir)
	snap := snapshotOf(t, guard)

	run := a.Apply(ctx, snap)
	g.Expect(run.Failed).To(BeEmpty())
	g.Expect(run.Created).To(Equal(1))
	cm := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "seeded"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("from", "manifest"))
	cm.Data["from"] = "admin"
	g.Expect(c.Update(ctx, cm)).To(Succeed())

	for range 2 {
		run = a.Apply(ctx, snap)
		g.Expect(run.Failed).To(BeEmpty())
		g.Expect(run.Created).To(Equal(0))
		g.Expect(run.CreateOnlyLeft).To(Equal(1))
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "seeded"}, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("from", "admin"))
	}
}

// Two included manifests for one object: an error naming both files; the
// first is applied, the second is not, the rest goes on.
func TestApplyDuplicatesNamedBoth(t *testing.T) {
	g := NewWithT(t)
	c, ctx, guard := applyEnv(t, configv1.Default)
	second := configMap("twice")
	dir := harness.WriteFiles(t, map[string]string{
		"0000_10_a.yaml":     configMap("twice"),
		"0000_20_b.yaml":     second[:len(second)-len("data:\n  from: manifest\n")] + "data:\n  from: second\n",
		"0000_30_other.yaml": configMap("other"),
	})
	a := newApplier(c, guard, dir)
	run := a.Apply(ctx, snapshotOf(t, guard))
	g.Expect(run.Invalid).To(HaveLen(1))
	g.Expect(run.Invalid[0].Error()).To(And(ContainSubstring("0000_10_a.yaml[0]"), ContainSubstring("0000_20_b.yaml[0]")))
	cm := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "twice"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("from", "manifest"))
	g.Expect(exists(ctx, c, &corev1.ConfigMap{}, "default", "other")).To(BeTrue())
}

// Scope comes from the server: a namespace on a cluster-scoped kind is
// dropped (and not reported as related), a namespaced kind without one is
// an error naming the field.
func TestApplyScopeFromServer(t *testing.T) {
	g := NewWithT(t)
	c, ctx, guard := applyEnv(t, configv1.Default)
	dir := harness.WriteFiles(t, map[string]string{
		"0000_10_clusterrole.yaml": "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: scoped-test\n  namespace: victim-ns\nrules: []\n",
		"0000_10_no-ns.yaml":       "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: no-namespace\n",
	})
	a := newApplier(c, guard, dir)
	snap := snapshotOf(t, guard)
	run := a.Apply(ctx, snap)
	g.Expect(run.Applied).To(HaveLen(1))
	g.Expect(run.Failed).To(HaveLen(1))
	g.Expect(run.Failed[0].Error()).To(And(ContainSubstring("0000_10_no-ns.yaml[0]"), ContainSubstring("metadata.namespace is required")))
	co, err := a.Status.Report(ctx, snap, run)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(co.Status.RelatedObjects).NotTo(ContainElement(configv1.ObjectReference{Resource: "namespaces", Name: "victim-ns"}))
}
