// Command manager runs featuregate-operator: it snapshots the cluster's
// FeatureGate at start, applies the release manifests that snapshot
// includes, and exits cleanly for a restart when the FeatureGate changes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	configv1 "github.com/openshift/api/config/v1"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/featuregate-operator/operator/api/v1alpha1"
	"github.com/featuregate-operator/operator/controllers"
	"github.com/featuregate-operator/operator/internal/config"
	"github.com/featuregate-operator/operator/pkg/featuregate"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "manifests" {
		os.Exit(manifestsCommand(os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:]))
}

// metricsCerts names the serving certificate for secure metrics; without
// one, controller-runtime generates a self-signed certificate in memory.
type metricsCerts struct {
	path, name, key string
}

func run(args []string) int {
	fs := flag.CommandLine
	flags := config.BindFlags(fs)
	var certs metricsCerts
	fs.StringVar(&certs.path, "metrics-cert-path", "", "Directory holding the metrics server certificate (watched for rotation); empty: self-signed.")
	fs.StringVar(&certs.name, "metrics-cert-name", "tls.crt", "Metrics server certificate file name.")
	fs.StringVar(&certs.key, "metrics-cert-key", "tls.key", "Metrics server key file name.")
	// Millisecond timestamps: outage and restart stories are told in them.
	zapOpts := zap.Options{TimeEncoder: zapcore.RFC3339NanoTimeEncoder}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	cfg, err := flags.Complete()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := start(cfg, certs); err != nil {
		ctrl.Log.WithName("setup").Error(err, "manager stopped with an error")
		return 1
	}
	return 0
}

func start(cfg *v1alpha1.OperatorConfig, certs metricsCerts) error {
	log := ctrl.Log.WithName("setup")
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(configv1.Install(scheme))

	opts := featuregate.Options{Name: cfg.FeatureGateName, Version: cfg.ReleaseVersion, WatchedGates: cfg.WatchedGates}
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	// The verifier is woken by the cache's watch errors, so it exists before
	// the manager; its other fields are filled in once the manager does.
	verifier := controllers.NewVerifier(controllers.Verifier{Options: opts})
	live, err := featuregate.NewLiveGetter(restConfig)
	if err != nil {
		return err
	}
	managerConfig := rest.CopyConfig(restConfig)
	managerConfig.Wrap(verifier.WrapTransport)
	mgr, err := ctrl.NewManager(managerConfig, ctrl.Options{
		Scheme:                        scheme,
		MapperProvider:                featuregate.MapperProvider,
		Metrics:                       metricsOptions(cfg, certs),
		HealthProbeBindAddress:        cfg.Health.BindAddress,
		LeaderElection:                cfg.LeaderElection.LeaderElect,
		LeaderElectionID:              cfg.LeaderElection.ResourceName,
		LeaderElectionNamespace:       cfg.LeaderElection.ResourceNamespace,
		LeaderElectionReleaseOnCancel: true, // hand the lease over at once on a restart
		GracefulShutdownTimeout:       &cfg.GracefulShutdownTimeout.Duration,
		Cache: cache.Options{
			ByObject: map[client.Object]cache.ByObject{
				// One object matters; cache only it.
				&configv1.FeatureGate{}: {Field: fields.OneTermEqualSelector("metadata.name", opts.ObjectName())},
			},
			DefaultWatchErrorHandler: verifier.WatchErrorHandler,
		},
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}

	ctx, cancel := context.WithCancel(ctrl.SetupSignalHandler())
	defer cancel()
	stopper := featuregate.NewStopper(cancel)
	startup := featuregate.NewStartup(live, opts)
	startup.BackoffCap = cfg.InitialFetchBackoffCap.Duration
	startup.Timeout = cfg.InitialFetchTimeout.Duration
	recorder := mgr.GetEventRecorder(controllers.EventSource)
	startup.OnSnapshot = func(snap featuregate.Snapshot) {
		controllers.StartupFeatureSet.WithLabelValues(snap.FeatureSetName()).Set(1)
		fg := &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: opts.ObjectName()}}
		fg.SetGroupVersionKind(configv1.GroupVersion.WithKind("FeatureGate"))
		recorder.Eventf(fg, nil, corev1.EventTypeNormal, "StartupSnapshot", "Snapshot", "startup feature set %s", snap)
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
		Recorder:     recorder,
		Events:       mgr.GetClient(),
		ResyncPeriod: cfg.ResyncPeriod.Duration,
	}
	if err := reconciler.SetupWithManager(mgr, startup, cfg.CacheSyncTimeout.Duration); err != nil {
		return fmt.Errorf("set up FeatureGate controller: %w", err)
	}

	verifier.Reader, verifier.Snapshots, verifier.Stopper, verifier.Recorder, verifier.Events = live, startup, stopper, recorder, mgr.GetClient()
	if err := mgr.Add(startup.AfterSnapshot(verifier)); err != nil {
		return err
	}
	applier := &controllers.Applier{
		Client:    mgr.GetClient(),
		Snapshots: startup,
		Live:      mgr.GetClient(),
		Options:   opts,
		Stopper:   stopper,
		Recorder:  recorder,
		Events:    mgr.GetClient(),
		Status: &controllers.StatusReporter{
			Client:  mgr.GetClient(),
			Reader:  mgr.GetAPIReader(),
			Name:    cfg.ClusterOperatorName,
			Version: cfg.ReleaseVersion,
			Options: opts,
		},
		Dir:          cfg.ManifestsDir,
		Profile:      cfg.ClusterProfile,
		ResyncPeriod: cfg.ResyncPeriod.Duration,
		Parallelism:  8,
	}
	if err := mgr.Add(startup.AfterSnapshot(applier)); err != nil {
		return err
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

// metricsOptions serves metrics over HTTPS behind the API server's
// authentication and authorization, as kubebuilder does, unless told not to.
func metricsOptions(cfg *v1alpha1.OperatorConfig, certs metricsCerts) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: cfg.Metrics.BindAddress, SecureServing: cfg.MetricsSecure()}
	if opts.SecureServing {
		opts.FilterProvider = filters.WithAuthenticationAndAuthorization
		if certs.path != "" {
			opts.CertDir, opts.CertName, opts.KeyName = certs.path, certs.name, certs.key
		}
	}
	return opts
}
