package featuregate_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/featuregatetest"
	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
)

// An operator built with the placeholder version reads the cluster's
// version from the ClusterVersion, as library-go does, with the
// FeatureGate's discipline: not ready until it is read, saying why.
func TestGuardPlaceholderVersionFromClusterVersion(t *testing.T) {
	g := NewWithT(t)
	cp := testenv.StartT(t, nil)
	c := testenv.Client(t, cp.Config)
	testenv.CreateFeatureGate(t, c, featuregatetest.FeatureGate(configv1.Default, featuregatetest.StatusGates("4.22.0", []string{"GateA"}, nil)))

	gd := newGuardOn(t, cp.Config, featuregate.Options{Version: "0.0.1-snapshot"})
	mgr := gd.newManager(t, ctrl.Options{})
	gd.start(t, mgr)
	g.Consistently(func() bool { _, ok := gd.guard.Snapshot(); return ok }).WithTimeout(time.Second).Should(BeFalse(), "no ClusterVersion: no version, no snapshot")
	g.Eventually(func() string { return gd.log.First("FeatureGate not read", "get ClusterVersion version") }).WithTimeout(10*time.Second).ShouldNot(BeEmpty(), "the retry says what it waits for")

	cv := &configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: "version"}, Spec: configv1.ClusterVersionSpec{ClusterID: "2b4c4e5a-0f7c-4f4e-9d8e-0a1b2c3d4e5f"}}
	g.Expect(c.Create(t.Context(), cv)).To(Succeed())
	cv.Status.Desired.Version = "4.22.0"
	g.Expect(c.Status().Update(t.Context(), cv)).To(Succeed())

	gd.current(t)
	snap, _ := gd.guard.Snapshot()
	g.Expect(snap.Version()).To(Equal("4.22.0"))
	g.Expect(gd.guard.Enabled("GateA")).To(BeTrue())
	g.Expect(gd.log.IndexWhere(testenv.All(testenv.Message("Startup snapshot taken"),
		testenv.KeyEquals("versionFrom", "ClusterVersion version status.desired.version")))).To(BeNumerically(">=", 0))

	// An upgrade moves the ClusterVersion, and the new version's entry
	// disables GateA: this process keeps the version it started for, and
	// that version's gates, which have not changed. The release rolls out
	// a new operator pod, whose start reads the new version.
	cv.Status.Desired.Version = "4.23.0"
	g.Expect(c.Status().Update(t.Context(), cv)).To(Succeed())
	fg := featuregatetest.FeatureGate(configv1.Default, featuregatetest.StatusGates("4.22.0", []string{"GateA"}, nil), featuregatetest.StatusGates("4.23.0", nil, []string{"GateA"}))
	live := &configv1.FeatureGate{}
	g.Expect(c.Get(t.Context(), client.ObjectKeyFromObject(fg), live)).To(Succeed())
	live.Status = fg.Status
	g.Expect(c.Status().Update(t.Context(), live)).To(Succeed())
	g.Consistently(func(g Gomega) {
		_, requested := gd.guard.StopReason()
		g.Expect(requested).To(BeFalse())
		g.Expect(gd.guard.Current()).To(BeTrue())
		g.Expect(gd.guard.Enabled("GateA")).To(BeTrue())
	}).WithTimeout(2 * time.Second).Should(Succeed())
}
