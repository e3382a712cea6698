package featuregatetest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/featuregatetest"
)

// A whole manager stops when a gate it consumes changes, and says why; no API
// server is involved (the configuration points nowhere), so the test is
// hermetic and takes well under a second.
func TestFileStopsTheWholeManager(t *testing.T) {
	const version = "4.22.0"
	f := featuregatetest.NewFile(t, featuregatetest.FeatureGate(configv1.Default,
		featuregatetest.StatusGates(version, []string{"ExampleGate"}, nil)))
	nowhere := &rest.Config{Host: "https://127.0.0.1:1"}
	guard, err := featuregate.NewGuard(nowhere, featuregate.Options{File: f.Path(), Version: version, EventRecorder: discardEvents{}})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := guard.NewManager(ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()

	for !guard.Enabled("ExampleGate") {
		select {
		case err := <-done:
			t.Fatalf("manager ended before its snapshot: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	f.Set(featuregatetest.FeatureGate(configv1.TechPreviewNoUpgrade,
		featuregatetest.StatusGates(version, nil, []string{"ExampleGate"})))
	if err := <-done; err != nil {
		t.Fatalf("Start after the change = %v, want nil (exit 0, restart)", err)
	}
	reason, requested := guard.StopReason()
	if !requested || reason != "gate ExampleGate enabled -> disabled in status for version 4.22.0" {
		t.Errorf("StopReason() = %q, %v", reason, requested)
	}
}

// discardEvents is an Options.EventRecorder for a test with no API server.
type discardEvents struct{}

func (discardEvents) Eventf(_, _ runtime.Object, _, _, _, _ string, _ ...any) {}

// An operator's test of its whole manager, hermetic: the FeatureGate comes
// from a file that the test changes. (Compiled, not run: t is the test's.)
func ExampleFile() {
	var t *testing.T // the test's own
	// The status entry for the operator's Version is what the guard reads.
	gates := featuregatetest.StatusGates("4.22.0", []string{"ExampleGate"}, nil)
	f := featuregatetest.NewFile(t, featuregatetest.FeatureGate(configv1.Default, gates))
	guard, err := featuregate.NewGuard(&rest.Config{Host: "https://127.0.0.1:1"}, // no API server
		featuregate.Options{File: f.Path(), Version: "4.22.0", EventRecorder: discardEvents{}})
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := guard.NewManager(ctrl.Options{Metrics: metricsserver.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	// The operator's own SetupWithManager(mgr) calls here, then mgr.Start
	// in a goroutine; once guard.Snapshot() is taken, the gate is turned off:
	f.Set(featuregatetest.FeatureGate(configv1.Default, featuregatetest.StatusGates("4.22.0", nil, []string{"ExampleGate"})))
	// mgr.Start returns nil, and StopReason names the change.
	reason, _ := guard.StopReason()
	fmt.Println(mgr != nil, reason)
}
