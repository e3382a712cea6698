package librarygo_test

import (
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/library-go/pkg/operator/configobserver/featuregates"
	"github.com/openshift/library-go/pkg/operator/events"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
)

// TestLibraryGoObserverTable is library-go's table for its feature-flags
// config observer (observe_featuregates_test.go, TestObserveFeatureFlags),
// which kube-apiserver's operator runs: there each case hands the observer
// a hardcoded FeatureGateAccess; here the case's gates are a FeatureGate's
// entry on a real API server, and the observer is handed an Access that
// read them. One case is not ported: "error getting current gates", a
// hardcoded access whose CurrentFeatureGates fails after the gates were
// observed. Ours cannot: once observed, the snapshot is the answer for the
// process.
func TestLibraryGoObserverTable(t *testing.T) {
	cfg := sharedConfig(t)
	admin := testenv.Client(t, cfg)
	configPath := []string{"foo", "bar"}
	tests := []struct {
		name                string
		enabled, disabled   []string
		notObserved         bool // no entry for the version: never observed
		expectedResult      []string
		knownFeatures       sets.Set[configv1.FeatureGateName]
		blacklistedFeatures sets.Set[configv1.FeatureGateName]
	}{{
		name:           "default",
		enabled:        []string{"OpenShiftPodSecurityAdmission"},
		disabled:       []string{"RetroactiveDefaultStorageClass"},
		expectedResult: []string{"OpenShiftPodSecurityAdmission=true", "RetroactiveDefaultStorageClass=false"},
	}, {
		name: "techpreview",
		enabled: []string{"OpenShiftPodSecurityAdmission", "ExternalCloudProvider", "CSIDriverSharedResource", "BuildCSIVolumes",
			"NodeSwap", "MachineAPIProviderOpenStack", "InsightsConfigAPI", "MatchLabelKeysInPodTopologySpread", "PDBUnhealthyPodEvictionPolicy"},
		disabled: []string{"RetroactiveDefaultStorageClass"},
		expectedResult: []string{"BuildCSIVolumes=true", "CSIDriverSharedResource=true", "ExternalCloudProvider=true", "InsightsConfigAPI=true",
			"MachineAPIProviderOpenStack=true", "MatchLabelKeysInPodTopologySpread=true", "NodeSwap=true", "OpenShiftPodSecurityAdmission=true",
			"PDBUnhealthyPodEvictionPolicy=true", "RetroactiveDefaultStorageClass=false"},
	}, {
		name:           "custom no upgrade and all allowed",
		enabled:        []string{"CustomFeatureEnabled"},
		disabled:       []string{"CustomFeatureDisabled"},
		expectedResult: []string{"CustomFeatureDisabled=false", "CustomFeatureEnabled=true"},
	}, {
		name:           "custom no upgrade flag set and none upgrades were provided",
		expectedResult: []string{},
	}, {
		name:           "custom no upgrade and known features",
		enabled:        []string{"CustomFeatureEnabled"},
		disabled:       []string{"CustomFeatureDisabled"},
		expectedResult: []string{"CustomFeatureEnabled=true"},
		knownFeatures:  sets.New[configv1.FeatureGateName]("CustomFeatureEnabled"),
	}, {
		name:                "custom no upgrade and blacklisted features",
		enabled:             []string{"CustomFeatureEnabled", "AnotherThing", "AThirdThing"},
		disabled:            []string{"CustomFeatureDisabled", "DisabledThing"},
		expectedResult:      []string{"AThirdThing=true", "CustomFeatureDisabled=false", "CustomFeatureEnabled=true"},
		blacklistedFeatures: sets.New[configv1.FeatureGateName]("AnotherThing", "DisabledThing"),
	}, {
		name:           "initial gates not observed",
		enabled:        []string{"CustomFeatureEnabled"},
		disabled:       []string{"CustomFeatureDisabled"},
		notObserved:    true,
		expectedResult: nil,
	}}
	const version = "4.22.0"
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			entryVersion := version
			if tc.notObserved {
				entryVersion = "4.21.0"
			}
			name := uniqueName()
			testenv.CreateFeatureGate(t, admin, &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: name},
				Status: gateEntries{entryVersion: {tc.enabled, tc.disabled}}.status()})
			r := run(t, cfg, version, "0.0.1-snapshot", named(name))
			if tc.notObserved {
				// Not observed for as long as the entry is missing: the
				// readiness check says so once the read was tried.
				gomega.NewWithT(t).Eventually(func() error { return r.Check(nil) }).WithTimeout(30 * time.Second).
					Should(gomega.MatchError(gomega.ContainSubstring("no status.featureGates entry for version " + version)))
			} else {
				r.observed(t)
			}

			eventRecorder := events.NewInMemoryRecorder("", clocktesting.NewFakePassiveClock(time.Now()))
			observeFn := featuregates.NewObserveFeatureFlagsFunc(tc.knownFeatures, tc.blacklistedFeatures, configPath, r.Access)
			observed, errs := observeFn(nil, eventRecorder, map[string]any{})
			if len(errs) != 0 {
				t.Fatal(errs)
			}
			actual, _, err := unstructured.NestedStringSlice(observed, configPath...)
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			slices.Sort(actual)
			if !reflect.DeepEqual(tc.expectedResult, actual) {
				t.Errorf("Unexpected features gates\n  got:      %v\n  expected: %v", actual, tc.expectedResult)
			}
		})
	}
}
