// Command consumer is the smallest operator that adopts the FeatureGate
// guard: it is not ready until it has read the cluster's FeatureGate, and
// exits 0 for a restart as soon as the FeatureGate differs from what it read.
package main

import (
	"context"
	"flag"
	"log"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

func main() {
	probe := flag.String("health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	version := flag.String("release-version", "", "Release version whose status.featureGates entry is read.")
	flag.Parse()
	ctrl.SetLogger(zap.New())
	ctx, cancel := context.WithCancel(ctrl.SetupSignalHandler())
	defer cancel()
	guard, err := featuregate.NewGuard(ctrl.GetConfigOrDie(), featuregate.Options{Version: *version, EventSource: "consumer", Cancel: cancel})
	if err != nil {
		log.Fatal(err)
	}
	mgr, err := ctrl.NewManager(guard.RESTConfig(), guard.ManagerOptions(ctrl.Options{HealthProbeBindAddress: *probe, Metrics: metricsserver.Options{BindAddress: "0"}}))
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
