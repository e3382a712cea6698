package controllers

import (
	"strings"
	"testing"
	"unicode/utf8"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/featuregatetest"
)

// During an upgrade the ClusterOperator keeps reporting the old version,
// Progressing=True naming both, until a run at the new version has applied
// everything; Available stays True throughout (origin's upgrade monitors).
func TestStatusVersionMovesAfterAFullRun(t *testing.T) {
	g := NewWithT(t)
	snap := snapshotAt(t, "4.19.0")
	s := &StatusReporter{Name: "featuregate-operator", FeatureGateName: "cluster"}
	st := &configv1.ClusterOperatorStatus{Versions: []configv1.OperandVersion{{Name: "operator", Version: "4.18.0"}}}

	s.fill(st, snap, runStatus{applied: 3, failed: 1, problems: []string{"x failed"}})
	g.Expect(st.Versions).To(ConsistOf(configv1.OperandVersion{Name: "operator", Version: "4.18.0"}), "not moved while a manifest fails")
	g.Expect(condition(&configv1.ClusterOperator{Status: *st}, configv1.OperatorProgressing)).To(And(
		HaveField("Status", configv1.ConditionTrue), HaveField("Reason", ReasonUpgrading),
		HaveField("Message", And(ContainSubstring("4.18.0"), ContainSubstring("4.19.0")))))
	g.Expect(condition(&configv1.ClusterOperator{Status: *st}, configv1.OperatorAvailable)).To(HaveField("Status", configv1.ConditionTrue))

	s.fill(st, snap, runStatus{applied: 4})
	g.Expect(st.Versions).To(ConsistOf(configv1.OperandVersion{Name: "operator", Version: "4.19.0"}))
	g.Expect(condition(&configv1.ClusterOperator{Status: *st}, configv1.OperatorProgressing)).To(HaveField("Status", configv1.ConditionFalse))

	// Not an upgrade: a first report, or the same version, sets it at once.
	fresh := &configv1.ClusterOperatorStatus{}
	s.fill(fresh, snap, runStatus{applied: 3, failed: 1})
	g.Expect(fresh.Versions).To(ConsistOf(configv1.OperandVersion{Name: "operator", Version: "4.19.0"}))
	g.Expect(condition(&configv1.ClusterOperator{Status: *fresh}, configv1.OperatorProgressing)).To(HaveField("Reason", ReasonRetrying))
}

// A new version's process says Progressing=True before its first run, and
// leaves the rest of the status alone.
func TestStatusStartingAnUpgrade(t *testing.T) {
	g := NewWithT(t)
	e := startEnv(t, configv1.Default, nil)
	co := &configv1.ClusterOperator{}
	co.Name = "featuregate-operator"
	g.Expect(e.c.Create(e.ctx, co)).To(Succeed())
	co.Status.Versions = []configv1.OperandVersion{{Name: "operator", Version: "4.18.0"}}
	setCondition(&co.Status, configv1.OperatorAvailable, configv1.ConditionTrue, ReasonAsExpected, "old")
	g.Expect(e.c.Status().Update(e.ctx, co)).To(Succeed())

	s := &StatusReporter{Client: e.c, Reader: e.c, Name: co.Name}
	g.Expect(s.Starting(e.ctx, "4.18.0")).To(Succeed())
	g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(co), co)).To(Succeed())
	g.Expect(condition(co, configv1.OperatorProgressing).Status).To(BeEmpty(), "same version: nothing written")

	g.Expect(s.Starting(e.ctx, "4.19.0")).To(Succeed())
	g.Expect(e.c.Get(e.ctx, client.ObjectKeyFromObject(co), co)).To(Succeed())
	g.Expect(condition(co, configv1.OperatorProgressing)).To(And(HaveField("Status", configv1.ConditionTrue), HaveField("Reason", ReasonUpgrading)))
	g.Expect(condition(co, configv1.OperatorAvailable)).To(HaveField("Message", "old"))
	g.Expect(co.Status.Versions).To(ConsistOf(configv1.OperandVersion{Name: "operator", Version: "4.18.0"}))
}

// The operator's own namespace is related, once, beside the FeatureGate and
// the namespaces a run applied into: must-gather collects the operator's
// pods from there even when the payload applies into no namespace.
func TestRelatedObjectsNameTheOperatorsNamespace(t *testing.T) {
	g := NewWithT(t)
	snap, _ := featuregatetest.New(configv1.Default).Snapshot()
	s := &StatusReporter{Name: "featuregate-operator", FeatureGateName: "cluster", Namespace: "featuregate-operator-system"}
	featureGate := configv1.ObjectReference{Group: configv1.GroupName, Resource: "featuregates", Name: "cluster"}
	own := configv1.ObjectReference{Resource: "namespaces", Name: "featuregate-operator-system"}

	st := &configv1.ClusterOperatorStatus{}
	s.fill(st, snap, runStatus{})
	g.Expect(st.RelatedObjects).To(Equal([]configv1.ObjectReference{featureGate, own}))

	s.fill(st, snap, runStatus{namespaces: []string{"featuregate-operator-system", "openshift-cluster-api"}})
	g.Expect(st.RelatedObjects).To(Equal([]configv1.ObjectReference{featureGate, own, {Resource: "namespaces", Name: "openshift-cluster-api"}}))
}

// snapshotAt is a Default snapshot of release version.
func snapshotAt(t *testing.T, version string) featuregate.Snapshot {
	t.Helper()
	fg := &configv1.FeatureGate{Status: configv1.FeatureGateStatus{FeatureGates: []configv1.FeatureGateDetails{{Version: version}}}}
	snap, err := featuregate.Read(fg, version)
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// A cut message stays within its bound, valid UTF-8 and marked.
func TestTruncate(t *testing.T) {
	if got := truncate("short", eventNoteLimit); got != "short" {
		t.Errorf("truncate(short) = %q", got)
	}
	exact := strings.Repeat("a", eventNoteLimit)
	if got := truncate(exact, eventNoteLimit); got != exact {
		t.Errorf("a message of exactly the limit was cut")
	}
	got := truncate(strings.Repeat("é", eventNoteLimit), eventNoteLimit) // two bytes each
	if len(got) > eventNoteLimit || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("truncate(long) = %d bytes, valid UTF-8 %v, marked %v", len(got), utf8.ValidString(got), strings.HasSuffix(got, "…"))
	}
}
