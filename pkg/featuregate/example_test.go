package featuregate_test

import (
	"context"
	"log"

	"github.com/openshift/api/features"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// An operator's main: the manager is built around the guard, and a requested
// stop is a clean exit that the kubelet answers with a fresh process.
func Example() {
	ctx, cancel := context.WithCancel(ctrl.SetupSignalHandler())
	defer cancel()
	guard, err := featuregate.NewGuard(ctrl.GetConfigOrDie(), featuregate.Options{
		Version: "4.18.0", EventSource: "example-operator", Cancel: cancel,
	})
	if err != nil {
		log.Fatal(err)
	}
	mgr, err := ctrl.NewManager(guard.RESTConfig(), guard.ManagerOptions(ctrl.Options{}))
	if err != nil {
		log.Fatal(err)
	}
	if err := guard.SetupWithManager(mgr); err != nil {
		log.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		log.Fatal(err)
	}
}

// Code that acts on the feature set waits for the snapshot and asks it.
func ExampleGuard_Enabled() {
	var guard *featuregate.Guard // from NewGuard
	var mgr ctrl.Manager
	_ = mgr.Add(guard.AfterSnapshot(manager.RunnableFunc(func(ctx context.Context) error {
		if guard.Enabled(features.FeatureGateExample) {
			// ... act on the snapshot, checking guard.Current(ctx) first
		}
		<-ctx.Done()
		return nil
	})))
}
