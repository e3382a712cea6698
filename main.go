// Command manager runs featuregate-operator: it snapshots the cluster's
// FeatureGate at start, applies the release manifests that snapshot
// includes, and exits cleanly for a restart when the FeatureGate changes.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	configv1 "github.com/openshift/api/config/v1"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/featuregate-operator/operator/api/v1alpha1"
	"github.com/featuregate-operator/operator/controllers"
	"github.com/featuregate-operator/operator/internal/cmd/audit"
	"github.com/featuregate-operator/operator/internal/cmd/manifests"
	"github.com/featuregate-operator/operator/internal/config"
	"github.com/featuregate-operator/operator/internal/metricsauth"
	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/manifest"
)

func main() {
	// A closed stdout or stderr (a log pipe whose reader went away) must not
	// kill the operator: writes fail, and the operator runs on.
	// (Notify, not Ignore: the runtime still dies of a broken stdout or
	// stderr unless the signal is delivered to a channel.)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	if len(os.Args) > 1 && os.Args[1] == "manifests" {
		os.Exit(manifests.Run(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "audit" {
		os.Exit(audit.Run(os.Args[2:], os.Stdout, os.Stderr))
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
	restConfig, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	// SIGHUP (a closed terminal) stops gracefully, like SIGTERM; a second
	// SIGTERM or SIGINT exits 1 at once (controller-runtime's handler).
	hangup, stopHangup := signal.NotifyContext(ctrl.SetupSignalHandler(), syscall.SIGHUP)
	defer stopHangup()
	guard, err := featuregate.NewGuard(restConfig, guardOptions(cfg))
	if err != nil {
		return err
	}
	mgr, err := guard.NewManager(managerOptions(cfg, certs, guard.TLSOpts))
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := controllers.RegisterMetrics(metrics.Registry); err != nil {
		return err
	}
	// The guard's manager starts it once the snapshot is taken.
	if err := mgr.Add(newApplier(cfg, mgr, guard)); err != nil {
		return err
	}

	log := ctrl.Log.WithName("setup")
	log.Info("Starting manager", "featureGate", cfg.FeatureGateName, "releaseVersion", cfg.ReleaseVersion)
	if err := mgr.Start(hangup); err != nil {
		if !leaderElectionLost(err) {
			return err
		}
		// A replica that lost its lease stops, and its restart campaigns
		// again: an ordinary event of an API server rollout, not a crash
		// (OpenShift's upgrade monitors count every non-zero exit).
		log.Info("Leader election lost; stopping, the restart campaigns again", "error", err.Error())
		return nil
	}
	reason, requested := guard.StopReason()
	if !requested {
		reason = "signal"
	}
	log.Info("Graceful shutdown complete", "reason", reason)
	return nil
}

func guardOptions(cfg *v1alpha1.OperatorConfig) featuregate.Options {
	watched := make([]configv1.FeatureGateName, 0, len(cfg.WatchedGates))
	for _, g := range cfg.WatchedGates {
		watched = append(watched, configv1.FeatureGateName(g))
	}
	return featuregate.Options{
		Name:         cfg.FeatureGateName,
		File:         cfg.FeatureGateFile,
		Version:      cfg.ReleaseVersion,
		WatchedGates: watched,
		// Inclusion reads spec.featureSet itself (the feature-set
		// annotation), as the cluster-version-operator does.
		WatchFeatureSet:     true,
		EventSource:         controllers.EventSource,
		BackoffCap:          cfg.InitialFetchBackoffCap.Duration,
		InitialFetchTimeout: cfg.InitialFetchTimeout.Duration,
		ResyncPeriod:        cfg.ResyncPeriod.Duration,
		CacheSyncTimeout:    cfg.CacheSyncTimeout.Duration,
		FreshnessBound:      cfg.FeatureGateFreshnessBound.Duration,
		TLSProfile:          tlsProfileOptions(cfg.Metrics),
	}
}

// tlsProfileOptions opts the guard into the APIServer's TLS profile when
// the metrics endpoint serves it.
func tlsProfileOptions(m v1alpha1.MetricsConfig) *featuregate.TLSProfileOptions {
	if m.TLSProfileFrom == "" {
		return nil
	}
	o := &featuregate.TLSProfileOptions{APIServer: m.TLSProfileFrom}
	if m.TLSProfileWhenAbsent != "" {
		o.Absent = &configv1.TLSSecurityProfile{Type: configv1.TLSProfileType(m.TLSProfileWhenAbsent)}
	}
	return o
}

func managerOptions(cfg *v1alpha1.OperatorConfig, certs metricsCerts, tlsOpts func(*tls.Config)) ctrl.Options {
	return ctrl.Options{
		// Only the types this operator reads and writes as Go types: the
		// guard adds config.openshift.io/v1, manifests are unstructured,
		// Events and leases have their own clients. Registering every
		// client-go group again would hold a second copy of that scheme
		// (about 0.7 MB) for nothing.
		Scheme: runtime.NewScheme(),
		// Its own ClusterOperator only (the Applier restores it when touched).
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&configv1.ClusterOperator{}: {Field: fields.OneTermEqualSelector("metadata.name", cfg.ClusterOperatorName)},
		}},
		Metrics:                 metricsOptions(cfg, certs, tlsOpts),
		HealthProbeBindAddress:  cfg.Health.BindAddress,
		LeaderElection:          cfg.LeaderElection.LeaderElect,
		LeaderElectionID:        cfg.LeaderElection.ResourceName,
		LeaderElectionNamespace: cfg.LeaderElection.ResourceNamespace,
		LeaseDuration:           &cfg.LeaderElection.LeaseDuration.Duration,
		RenewDeadline:           &cfg.LeaderElection.RenewDeadline.Duration,
		RetryPeriod:             &cfg.LeaderElection.RetryPeriod.Duration,
		GracefulShutdownTimeout: &cfg.GracefulShutdownTimeout.Duration,
	}
}

// leaderElectionLost reports whether the manager stopped because its lease
// was lost (controller-runtime says so only in the error's text).
func leaderElectionLost(err error) bool { return strings.Contains(err.Error(), "leader election lost") }

// serviceAccountNamespaceFile is where the kubelet puts the pod's
// namespace beside its ServiceAccount token.
const serviceAccountNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// ownNamespace is the namespace the operator runs in, read from path; ""
// outside a pod (run-local, a test), where there is none to relate.
func ownNamespace(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

func newApplier(cfg *v1alpha1.OperatorConfig, mgr ctrl.Manager, guard *featuregate.Guard) *controllers.Applier {
	return &controllers.Applier{
		Client:   mgr.GetClient(),
		Reader:   mgr.GetAPIReader(),
		Cache:    mgr.GetCache(),
		Gates:    guard,
		Recorder: mgr.GetEventRecorder(controllers.EventSource),
		Status: &controllers.StatusReporter{
			Client:          mgr.GetClient(),
			Reader:          mgr.GetAPIReader(),
			Name:            cfg.ClusterOperatorName,
			FeatureGateName: cfg.FeatureGateName,
			Namespace:       ownNamespace(serviceAccountNamespaceFile),
			Gates:           guard,
		},
		Dir:               cfg.ManifestsDir,
		Scan:              manifest.Options{MaxFileSize: cfg.MaxManifestSize.Value()},
		Profile:           cfg.ClusterProfile,
		ExcludeIdentifier: cfg.ExcludeIdentifier,
		ResyncPeriod:      cfg.ResyncPeriod.Duration,
		Parallelism:       8,
		Log:               ctrl.Log.WithName("apply"),
	}
}

// metricsOptions serves metrics over HTTPS behind the API server's
// authentication and authorization, as kubebuilder does, unless told not to.
func metricsOptions(cfg *v1alpha1.OperatorConfig, certs metricsCerts, tlsOpts func(*tls.Config)) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: cfg.Metrics.BindAddress, SecureServing: cfg.MetricsSecure()}
	if opts.SecureServing {
		if cfg.Metrics.TLSProfileFrom != "" {
			// The cluster's TLS profile, read into the snapshot: no
			// handshake before it is read.
			opts.TLSOpts = append(opts.TLSOpts, tlsOpts)
		}
		opts.FilterProvider = metricsauth.FilterProvider
		if certs.path != "" {
			opts.CertDir, opts.CertName, opts.KeyName = certs.path, certs.name, certs.key
		}
	}
	return opts
}
