// Package librarygo_test holds the guard against library-go's
// FeatureGateAccess: that code typed on library-go's featuregates.FeatureGate
// takes a featuregate.Snapshot unchanged, and that library-go behaves as
// docs/migrating-from-library-go.md says it does.
package librarygo_test

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	configfake "github.com/openshift/client-go/config/clientset/versioned/fake"
	configinformers "github.com/openshift/client-go/config/informers/externalversions"
	"github.com/openshift/library-go/pkg/operator/configobserver/featuregates"
	"github.com/openshift/library-go/pkg/operator/events"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/featuregatetest"
)

// The point of this module: a Snapshot is a library-go FeatureGate, so code
// typed on that interface takes a snapshot unchanged.
var _ featuregates.FeatureGate = featuregate.Snapshot{}

// What featuregatetest.Gates hands out is a Snapshot too.
var _ = func(g *featuregatetest.Gates) (fg featuregates.FeatureGate, ok bool) {
	fg, ok = g.Snapshot()
	return fg, ok
}

// gatedBy stands for code written against library-go: it knows only the
// interface.
func gatedBy(fg featuregates.FeatureGate, gate configv1.FeatureGateName) bool {
	return fg.Enabled(gate)
}

func TestSnapshotAsLibraryGoFeatureGate(t *testing.T) {
	fg := featuregatetest.FeatureGate(configv1.TechPreviewNoUpgrade,
		featuregatetest.StatusGates("4.22.0", []string{"GateA"}, []string{"GateB"}))
	snap, err := featuregate.Read(fg, "4.22.0")
	if err != nil {
		t.Fatal(err)
	}
	// library-go's own FeatureGate, from the same lists, for comparison.
	lib := featuregates.NewFeatureGate([]configv1.FeatureGateName{"GateA"}, []configv1.FeatureGateName{"GateB"})

	for _, gate := range []configv1.FeatureGateName{"GateA", "GateB"} {
		if got, want := gatedBy(snap, gate), gatedBy(lib, gate); got != want {
			t.Errorf("Enabled(%s) through the interface: snapshot %v, library-go %v", gate, got, want)
		}
	}
	known := func(fg featuregates.FeatureGate) []configv1.FeatureGateName {
		k := fg.KnownFeatures()
		slices.Sort(k) // library-go lists enabled then disabled; the snapshot sorts
		return k
	}
	if got, want := known(snap), known(lib); !reflect.DeepEqual(got, want) {
		t.Errorf("KnownFeatures: snapshot %v, library-go %v", got, want)
	}

	// The one difference in what they answer: a gate the entry does not
	// list is false for the snapshot and a panic for library-go.
	if gatedBy(snap, "GateUnlisted") {
		t.Error("snapshot: an unlisted gate reads as enabled")
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("library-go's FeatureGate no longer panics on an unlisted gate; docs/migrating-from-library-go.md says it does")
			}
		}()
		gatedBy(lib, "GateUnlisted")
	}()

	// featuregatetest.Gates hands out the same type.
	g := featuregatetest.New("", "GateA")
	var through featuregates.FeatureGate
	through, ok := g.Snapshot()
	if !ok || !through.Enabled("GateA") || through.Enabled("GateB") {
		t.Errorf("featuregatetest snapshot through the interface: ok %v, GateA %v, GateB %v", ok, through.Enabled("GateA"), through.Enabled("GateB"))
	}
}

// TestLibraryGoChangePath checks what the migration guide says of
// library-go's FeatureGateAccess, with fake informers and no API server:
// the change handler is called on the first read with no previous features
// (which ForceExit ignores), then on a later change with them; a
// ClusterVersion event re-resolves the release version when the operator is
// built with the placeholder; an event that changes nothing calls nothing;
// and the Events are FeatureGatesInitialized and FeatureGatesModified.
func TestLibraryGoChangePath(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	const marker = "0.0.1-snapshot"
	fg := featuregatetest.FeatureGate(configv1.Default,
		featuregatetest.StatusGates("4.21.0", []string{"GateA"}, []string{"GateB"}),
		featuregatetest.StatusGates("4.22.0", []string{"GateA", "GateB"}, nil))
	cv := &configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: "version"}}
	cv.Status.Desired.Version = "4.21.0"
	client := configfake.NewSimpleClientset(fg, cv)
	informers := configinformers.NewSharedInformerFactory(client, 0)
	recorder := events.NewInMemoryRecorder("librarygo-test", clocktesting.NewFakePassiveClock(time.Now()))

	access := featuregates.NewFeatureGateAccess(marker, marker,
		informers.Config().V1().ClusterVersions(), informers.Config().V1().FeatureGates(), recorder)
	changes := make(chan featuregates.FeatureChange, 10)
	// The handler is called with the accessor's lock held: it must not block.
	access.SetChangeHandler(func(c featuregates.FeatureChange) { changes <- c })
	informers.Start(ctx.Done())
	go access.Run(ctx)

	next := func(what string) featuregates.FeatureChange {
		t.Helper()
		select {
		case c := <-changes:
			return c
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the change handler was not called", what)
			return featuregates.FeatureChange{}
		}
	}
	none := func(what string) {
		t.Helper()
		select {
		case c := <-changes:
			t.Fatalf("%s: the change handler was called: %+v", what, c)
		case <-time.After(500 * time.Millisecond):
		}
	}

	first := next("first read")
	if first.Previous != nil {
		t.Fatalf("first read: Previous = %+v, want nil (ForceExit exits only when it is set)", first.Previous)
	}
	if !reflect.DeepEqual(first.New.Enabled, []configv1.FeatureGateName{"GateA"}) {
		t.Fatalf("first read: enabled %v, want the 4.21.0 entry's [GateA]", first.New.Enabled)
	}

	// A FeatureGate update that leaves this version's lists alone.
	fg = fg.DeepCopy()
	fg.Annotations = map[string]string{"touched": "true"}
	if _, err := client.ConfigV1().FeatureGates().Update(ctx, fg, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	none("an update that changes no gate")

	// An upgrade starts: only the ClusterVersion changes. library-go resolves
	// the version again and reads the 4.22.0 entry: a change.
	cv = cv.DeepCopy()
	cv.Status.Desired.Version = "4.22.0"
	if _, err := client.ConfigV1().ClusterVersions().Update(ctx, cv, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	second := next("ClusterVersion desired version moved to 4.22.0")
	if second.Previous == nil || !reflect.DeepEqual(second.New.Enabled, []configv1.FeatureGateName{"GateA", "GateB"}) {
		t.Fatalf("after the ClusterVersion update: %+v, want a change with Previous set and [GateA GateB] enabled", second)
	}

	var reasons []string
	for _, e := range recorder.Events() {
		reasons = append(reasons, e.Reason)
		if e.Type != "Normal" {
			t.Errorf("Event %s has type %s, want Normal", e.Reason, e.Type)
		}
	}
	if want := []string{"FeatureGatesInitialized", "FeatureGatesModified"}; !reflect.DeepEqual(reasons, want) {
		t.Errorf("Event reasons %v, want %v", reasons, want)
	}
}
