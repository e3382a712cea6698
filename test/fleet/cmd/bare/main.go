// Command bare is the smallest adopter of the guard, written from
// docs/adopting.md: NewGuard, NewManager with a probe address, Start, and
// nothing else to do. It is the guard's side of the fleet's stampede
// beside test/librarygo/cmd/idle, library-go's FeatureGateAccess with
// nothing else to do: what either costs a restart, without an operator's
// own controllers (examples/consumer has a ConfigMap controller, an HTTP
// server and a preview controller).
//
// It exits 0 after a requested stop or a signal, 1 on an error.
package main

import (
	"flag"
	"os"
	"strings"

	configv1 "github.com/openshift/api/config/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

func main() {
	version := flag.String("release-version", "", "Release version whose status.featureGates entry is read.")
	watched := flag.String("watched-gates", "", "Gates consumed, separated by commas (empty: every gate of the version's entry).")
	probeAddr := flag.String("health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	log := ctrl.Log.WithName("setup")

	var gates []configv1.FeatureGateName
	for g := range strings.SplitSeq(*watched, ",") {
		if g != "" {
			gates = append(gates, configv1.FeatureGateName(g))
		}
	}
	guard, err := featuregate.NewGuard(ctrl.GetConfigOrDie(), featuregate.Options{
		Version: *version, WatchedGates: gates, EventSource: "bare",
	})
	if err != nil {
		log.Error(err, "Guard not built")
		os.Exit(1)
	}
	mgr, err := guard.NewManager(ctrl.Options{
		HealthProbeBindAddress: *probeAddr,
		Metrics:                metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		log.Error(err, "Manager not built")
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "Stopped with an error")
		os.Exit(1)
	}
	reason, _ := guard.StopReason()
	log.Info("Stopped", "reason", reason)
}
