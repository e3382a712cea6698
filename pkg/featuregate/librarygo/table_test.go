package librarygo_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/operator/configobserver/featuregates"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
)

// gateEntries builds a FeatureGate as library-go's table does: per version,
// the enabled and disabled gates.
type gateEntries map[string][2][]string

func (e gateEntries) status() configv1.FeatureGateStatus {
	var st configv1.FeatureGateStatus
	for version, lists := range e {
		d := configv1.FeatureGateDetails{Version: version, Enabled: []configv1.FeatureGateAttributes{}, Disabled: []configv1.FeatureGateAttributes{}}
		for _, g := range lists[0] {
			d.Enabled = append(d.Enabled, configv1.FeatureGateAttributes{Name: configv1.FeatureGateName(g)})
		}
		for _, g := range lists[1] {
			d.Disabled = append(d.Disabled, configv1.FeatureGateAttributes{Name: configv1.FeatureGateName(g)})
		}
		st.FeatureGates = append(st.FeatureGates, d)
	}
	return st
}

func gates(names ...string) []configv1.FeatureGateName {
	return featuregates.StringsToFeatureGateNames(names)
}

// TestLibraryGoReaderTable is library-go's own table for its
// FeatureGateAccess (simple_featuregate_reader_test.go,
// Test_defaultFeatureGateAccess_syncHandler), each case run against a real
// API server: the first FeatureGate is created before the Access runs, the
// second written once the gates are observed. library-go calls its sync
// function by hand on a lister; here the Access reads for itself, as it
// does in an operator. Where the guard's rule is stricter the case says
// so, and docs/migrating-from-library-go.md lists it.
func TestLibraryGoReaderTable(t *testing.T) {
	cfg := sharedConfig(t)
	admin := testenv.Client(t, cfg)
	tests := []struct {
		name                                 string
		first, second                        gateEntries
		desiredVersion, missingVersionMarker string
		clusterVersion                       string
		// calls is how many times the handler is called: 1 unless set.
		calls          int
		changeVerifier func(t *testing.T, history []featuregates.FeatureChange)
		// wantErr: library-go's sync returns an error and observes nothing.
		// Here: not observed, and readiness says which entry is missing.
		wantErr string
	}{{
		name:           "read-explicit-version",
		first:          gateEntries{"desired-version": {{"alpha", "bravo"}, {"charlie", "delta"}}},
		desiredVersion: "desired-version",
		changeVerifier: firstOnly(gates("alpha", "bravo"), gates("charlie", "delta")),
	}, {
		name: "read-explicit-version-from-others",
		first: gateEntries{
			"desired-version": {{"alpha", "bravo"}, {"charlie", "delta"}},
			"other-version":   {{"yankee", "zulu"}, nil},
		},
		desiredVersion: "desired-version",
		changeVerifier: firstOnly(gates("alpha", "bravo"), gates("charlie", "delta")),
	}, {
		name:           "no-change-means-no-extra-watch-call",
		first:          gateEntries{"desired-version": {{"alpha", "bravo"}, {"charlie", "delta"}}},
		second:         gateEntries{"desired-version": {{"alpha", "bravo"}, {"charlie", "delta"}}},
		desiredVersion: "desired-version",
		changeVerifier: firstOnly(gates("alpha", "bravo"), gates("charlie", "delta")),
	}, {
		name:           "change-means-watch-call",
		first:          gateEntries{"desired-version": {{"alpha", "bravo"}, {"charlie", "delta"}}},
		second:         gateEntries{"desired-version": {{"alpha", "bravo", "charlie", "delta"}, nil}},
		desiredVersion: "desired-version",
		calls:          2,
		changeVerifier: func(t *testing.T, history []featuregates.FeatureChange) {
			if len(history) != 2 {
				t.Fatalf("bad changes: %+v", history)
			}
			firstOnly(gates("alpha", "bravo"), gates("charlie", "delta"))(t, history[:1])
			if history[1].Previous == nil || !reflect.DeepEqual(*history[1].Previous, history[0].New) {
				t.Fatalf("bad changes: %+v", history)
			}
			if !reflect.DeepEqual(gates("alpha", "bravo", "charlie", "delta"), history[1].New.Enabled) {
				t.Fatal(history[1].New.Enabled)
			}
			if len(history[1].New.Disabled) != 0 {
				t.Fatal(history[1].New.Disabled)
			}
		},
	}, {
		name:                 "missing-version-means-use-cluster-version",
		first:                gateEntries{"other-version": {{"alpha", "bravo"}, {"charlie", "delta"}}},
		desiredVersion:       "missing-version",
		missingVersionMarker: "missing-version",
		clusterVersion:       "other-version",
		changeVerifier:       firstOnly(gates("alpha", "bravo"), gates("charlie", "delta")),
	}, {
		name:           "missing desiredVersion",
		first:          gateEntries{"other-version": {{"alpha", "bravo"}, {"charlie", "delta"}}},
		desiredVersion: "desired-version",
		wantErr:        "no status.featureGates entry for version desired-version",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if tt.clusterVersion != "" {
				setClusterVersionHistory(t, admin, tt.clusterVersion)
			}
			name := uniqueName()
			fg := &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: tt.first.status()}
			testenv.CreateFeatureGate(t, admin, fg)
			r := run(t, cfg, tt.desiredVersion, tt.missingVersionMarker, named(name))

			if tt.wantErr != "" {
				g := gomega.NewWithT(t)
				g.Eventually(func() error { return r.Check(nil) }).WithTimeout(30 * time.Second).
					Should(gomega.MatchError(gomega.ContainSubstring(tt.wantErr)))
				if r.AreInitialFeatureGatesObserved() {
					t.Fatal("observed a FeatureGate without the desired version's entry")
				}
				if _, err := r.CurrentFeatureGates(); err == nil {
					t.Fatal("CurrentFeatureGates answered before the gates were observed")
				}
				if h := r.changes.get(); len(h) != 0 {
					t.Fatalf("the change handler was called: %+v", h)
				}
				return
			}
			r.observed(t)
			if err := r.Check(nil); err != nil {
				t.Fatalf("observed, yet not ready: %v", err)
			}
			r.waitChanges(t, 1)
			if tt.second != nil {
				if err := admin.Get(ctx, client.ObjectKeyFromObject(fg), fg); err != nil {
					t.Fatal(err)
				}
				fg.Status = tt.second.status()
				if err := admin.Status().Update(ctx, fg); err != nil {
					t.Fatal(err)
				}
				if tt.calls > 1 {
					r.waitChanges(t, tt.calls)
				} else {
					// Nothing must come: a write the component does not
					// consume never calls the handler. Bounded, not
					// proof: a call later than this would be missed.
					gomega.NewWithT(t).Consistently(func() int { return len(r.changes.get()) }).
						WithTimeout(2 * time.Second).Should(gomega.Equal(1))
				}
			}
			tt.changeVerifier(t, r.changes.get())
			want := []string{"Normal FeatureGatesInitialized"}
			if len(r.changes.get()) > 1 {
				want = append(want, "Normal FeatureGatesModified")
				// The handler is called once the guard has stopped:
				// Run then waits for its context, as library-go's.
				select {
				case <-r.done:
					t.Fatal("Run returned before its context ended")
				default:
				}
			}
			gomega.NewWithT(t).Eventually(func() []string { return reasons(r.recorder) }).
				WithTimeout(10 * time.Second).Should(gomega.Equal(want))
		})
	}
}

// firstOnly is library-go's verifier for a run with one observation and no
// change: one call, no Previous, the entry's lists.
func firstOnly(enabled, disabled []configv1.FeatureGateName) func(t *testing.T, history []featuregates.FeatureChange) {
	return func(t *testing.T, history []featuregates.FeatureChange) {
		t.Helper()
		if len(history) != 1 {
			t.Fatalf("bad changes: %+v", history)
		}
		if history[0].Previous != nil {
			t.Fatalf("bad changes: %+v", history)
		}
		if !reflect.DeepEqual(enabled, history[0].New.Enabled) {
			t.Fatal(history[0].New.Enabled)
		}
		if !reflect.DeepEqual(disabled, history[0].New.Disabled) {
			t.Fatal(history[0].New.Disabled)
		}
	}
}

// setClusterVersionHistory makes the ClusterVersion "version" report v as
// its newest history entry and no desired version, as library-go's table
// does; it is deleted when the test ends.
func setClusterVersionHistory(t *testing.T, c client.Client, v string) {
	t.Helper()
	ctx := t.Context()
	cv := &configv1.ClusterVersion{ObjectMeta: metav1.ObjectMeta{Name: "version"},
		Spec: configv1.ClusterVersionSpec{ClusterID: "01234567-89ab-cdef-0123-456789abcdef"}}
	if err := c.Create(ctx, cv); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), cv) })
	now := metav1.Now()
	cv.Status = configv1.ClusterVersionStatus{
		History:     []configv1.UpdateHistory{{Version: v, State: configv1.CompletedUpdate, StartedTime: now, CompletionTime: &now, Image: "example.com/release@sha256:0"}},
		VersionHash: "x", AvailableUpdates: nil,
	}
	if err := c.Status().Update(ctx, cv); err != nil {
		t.Fatalf("ClusterVersion status: %v", err)
	}
}
