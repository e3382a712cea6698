// Command manager runs featuregate-operator: it snapshots the cluster's
// FeatureGate at start, applies the release manifests that snapshot
// includes, and exits cleanly for a restart when the FeatureGate changes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/featuregate-operator/operator/controllers"
	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// settings is everything the command line says.
type settings struct {
	featureGateName         string
	releaseVersion          string
	watchedGates            string
	resyncPeriod            time.Duration
	gracefulShutdownTimeout time.Duration
	backoffCap              time.Duration
	initialFetchTimeout     time.Duration
	cacheSyncTimeout        time.Duration
	leaderElect             bool
	leaderElectionNamespace string
	leaderElectionID        string
	metricsAddr             string
	probeAddr               string
}

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	var s settings
	fs := flag.CommandLine
	fs.StringVar(&s.featureGateName, "feature-gate-name", featuregate.DefaultName, "Name of the FeatureGate to snapshot.")
	fs.StringVar(&s.releaseVersion, "release-version", "", "This component's release version; when set, the snapshot carries the status.featureGates entry for it.")
	fs.StringVar(&s.watchedGates, "watched-gates", "", "Comma-separated gates the component consumes; when set, only these gates are compared.")
	fs.DurationVar(&s.resyncPeriod, "resync-period", 3*time.Minute, "How often the FeatureGate is compared without an event.")
	fs.DurationVar(&s.gracefulShutdownTimeout, "graceful-shutdown-timeout", 30*time.Second, "How long runnables get to stop.")
	fs.DurationVar(&s.backoffCap, "initial-fetch-backoff-cap", featuregate.DefaultBackoffCap, "Longest wait between initial FeatureGate reads.")
	fs.DurationVar(&s.initialFetchTimeout, "initial-fetch-timeout", 0, "Exit 1 after this long without a snapshot (0: wait for ever).")
	fs.DurationVar(&s.cacheSyncTimeout, "cache-sync-timeout", 2*time.Minute, "How long a controller waits for its cache to sync.")
	fs.BoolVar(&s.leaderElect, "leader-elect", false, "Elect a leader for applying manifests; every replica still snapshots and compares.")
	fs.StringVar(&s.leaderElectionNamespace, "leader-election-namespace", "", "Namespace of the leader election lease (default: in-cluster namespace).")
	fs.StringVar(&s.leaderElectionID, "leader-election-id", "featuregate-operator.featuregate-operator.io", "Name of the leader election lease.")
	fs.StringVar(&s.metricsAddr, "metrics-bind-address", "0", "Metrics address; 0 disables it.")
	fs.StringVar(&s.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	zapOpts := zap.Options{Development: false}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	if err := start(s); err != nil {
		log.Error(err, "manager stopped with an error")
		return 1
	}
	return 0
}

func start(s settings) error {
	log := ctrl.Log.WithName("setup")
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(configv1.Install(scheme))

	opts := featuregate.Options{Name: s.featureGateName, Version: s.releaseVersion, WatchedGates: splitList(s.watchedGates)}
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                        scheme,
		MapperProvider:                featuregate.MapperProvider,
		Metrics:                       metricsserver.Options{BindAddress: s.metricsAddr},
		HealthProbeBindAddress:        s.probeAddr,
		LeaderElection:                s.leaderElect,
		LeaderElectionID:              s.leaderElectionID,
		LeaderElectionNamespace:       s.leaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
		GracefulShutdownTimeout:       &s.gracefulShutdownTimeout,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			// One object matters; cache only it.
			&configv1.FeatureGate{}: {Field: fields.OneTermEqualSelector("metadata.name", opts.ObjectName())},
		}},
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}

	ctx, cancel := context.WithCancel(ctrl.SetupSignalHandler())
	defer cancel()
	stopper := featuregate.NewStopper(cancel)
	startup := featuregate.NewStartup(mgr.GetAPIReader(), opts)
	startup.BackoffCap = s.backoffCap
	startup.Timeout = s.initialFetchTimeout
	startup.OnSnapshot = func(snap featuregate.Snapshot) {
		controllers.StartupFeatureSet.WithLabelValues(snap.FeatureSetName()).Set(1)
	}
	for _, r := range []interface{ Start(context.Context) error }{startup, stopper} {
		if err := mgr.Add(r); err != nil {
			return err
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("featuregate", startup.Check); err != nil {
		return err
	}
	reconciler := &controllers.FeatureGateReconciler{
		Client:       mgr.GetClient(),
		Snapshots:    startup,
		Options:      opts,
		Stopper:      stopper,
		Recorder:     mgr.GetEventRecorder("featuregate-operator"),
		ResyncPeriod: s.resyncPeriod,
	}
	if err := reconciler.SetupWithManager(mgr, startup, s.cacheSyncTimeout); err != nil {
		return fmt.Errorf("set up FeatureGate controller: %w", err)
	}

	log.Info("starting manager", "featureGate", opts.ObjectName(), "releaseVersion", opts.Version)
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	reason, requested := stopper.Reason()
	if !requested {
		reason = "signal"
	}
	log.Info("graceful shutdown complete: "+reason, "reason", reason)
	return nil
}

func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
