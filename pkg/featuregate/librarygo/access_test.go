package librarygo_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/operator/configobserver/featuregates"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
	"github.com/featuregate-operator/operator/pkg/featuregate/librarygo"
)

// TestAccessWithTheAPIDownAtStart is the seed's situation under library-go's
// idiom: the operator starts while the API server is down, runs the access
// and waits for InitialFeatureGatesObserved with library-go's recommended
// one-minute bound. Nothing is observed, CurrentFeatureGates refuses and
// the health check fails until the API server answers; then the gates are
// the cluster's, not a default. A change of the entry calls the handler
// once, with Previous set, and Current turns false; a second write does
// not call it again.
func TestAccessWithTheAPIDownAtStart(t *testing.T) {
	cp := testenv.StartT(t, nil)
	admin := testenv.Client(t, cp.Config)
	const version = "4.22.0"
	fg := &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec:   configv1.FeatureGateSpec{FeatureGateSelection: configv1.FeatureGateSelection{FeatureSet: configv1.TechPreviewNoUpgrade}},
		Status: gateEntries{version: {{"GateA"}, {"GateB"}}}.status()}
	testenv.CreateFeatureGate(t, admin, fg)
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}

	r := run(t, cp.Config, version, "0.0.1-snapshot")
	g := gomega.NewWithT(t)
	g.Eventually(func() error { return r.Check(nil) }).WithTimeout(30*time.Second).
		Should(gomega.MatchError(gomega.ContainSubstring("FeatureGate")), "readiness with the API down")
	if r.AreInitialFeatureGatesObserved() {
		t.Fatal("observed with the API server down")
	}
	if fgs, err := r.CurrentFeatureGates(); err == nil {
		t.Fatalf("CurrentFeatureGates answered %v with the API server down", fgs.KnownFeatures())
	}
	if r.Current() {
		t.Fatal("Current with no snapshot")
	}

	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	// library-go's idiom, as its doc comment writes it.
	select {
	case <-r.InitialFeatureGatesObserved():
		fgs, err := r.CurrentFeatureGates()
		if err != nil {
			t.Fatal(err)
		}
		if !fgs.Enabled("GateA") || fgs.Enabled("GateB") {
			t.Fatalf("gates after the API returned: %v", fgs.KnownFeatures())
		}
	case <-time.After(1 * time.Minute):
		t.Fatalf("timed out waiting for FeatureGate detection: %v", r.Check(nil))
	}
	if err := r.Check(nil); err != nil {
		t.Fatalf("observed, yet not ready: %v", err)
	}
	g.Eventually(r.Current).WithTimeout(30*time.Second).Should(gomega.BeTrue(), "Current once the snapshot is proven")
	if snap, _ := r.Snapshot(); snap.FeatureSetName() != string(configv1.TechPreviewNoUpgrade) {
		t.Fatalf("snapshot feature set %q, want the cluster's", snap.FeatureSetName())
	}

	ctx := t.Context()
	update := func(entries gateEntries) {
		t.Helper()
		if err := admin.Get(ctx, client.ObjectKeyFromObject(fg), fg); err != nil {
			t.Fatal(err)
		}
		fg.Status = entries.status()
		if err := admin.Status().Update(ctx, fg); err != nil {
			t.Fatal(err)
		}
	}
	update(gateEntries{version: {{"GateA", "GateB"}, nil}})
	history := r.waitChanges(t, 2)
	if history[0].Previous != nil || history[1].Previous == nil {
		t.Fatalf("history %+v: want the first observation, then a change", history)
	}
	want := featuregates.Features{Enabled: gates("GateA"), Disabled: gates("GateB")}
	if !reflect.DeepEqual(*history[1].Previous, want) || !reflect.DeepEqual(history[1].New, featuregates.Features{Enabled: gates("GateA", "GateB")}) {
		t.Fatalf("change %+v -> %+v", *history[1].Previous, history[1].New)
	}
	if r.Current() {
		t.Fatal("Current after the change")
	}
	// The snapshot is still the answer: the process is to restart.
	if fgs, _ := r.CurrentFeatureGates(); fgs.Enabled("GateB") {
		t.Fatal("CurrentFeatureGates moved to the changed gates")
	}
	update(gateEntries{version: {nil, {"GateA", "GateB"}}})
	g.Consistently(func() int { return len(r.changes.get()) }).WithTimeout(time.Second).Should(gomega.Equal(2),
		"the handler is called once per process")
}

// A Readiness passes while no access reports to it (a standby replica runs
// none), fails once one does until its snapshot is taken, then passes.
func TestReadinessFollowsTheAccessReportingToIt(t *testing.T) {
	cp := testenv.StartT(t, nil)
	admin := testenv.Client(t, cp.Config)
	const version = "4.22.0"
	testenv.CreateFeatureGate(t, admin, &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Status: gateEntries{version: {{"GateA"}, nil}}.status()})
	readiness := &librarygo.Readiness{}
	if err := readiness.Check(nil); err != nil {
		t.Fatalf("no access reports to it yet: %v", err)
	}
	if err := cp.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	r := run(t, cp.Config, version, "0.0.1-snapshot", librarygo.ReportTo(readiness))
	g := gomega.NewWithT(t)
	g.Eventually(func() error { return readiness.Check(nil) }).WithTimeout(30*time.Second).
		Should(gomega.MatchError(gomega.ContainSubstring("FeatureGate")), "with an access reporting, the API down")
	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	r.observed(t)
	if err := readiness.Check(nil); err != nil {
		t.Fatalf("observed, yet the readiness fails: %v", err)
	}
}
