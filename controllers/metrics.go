package controllers

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// StartupFeatureSet is 1 for the feature set of the startup snapshot.
	StartupFeatureSet = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "featuregate_operator_startup_feature_set",
		Help: "The feature set of the FeatureGate snapshot taken at startup (1 for the set in force).",
	}, []string{"feature_set"})

	// ShutdownRequests counts reconciles that found the FeatureGate changed.
	ShutdownRequests = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "featuregate_operator_shutdown_requests_total",
		Help: "Reconciles that found the FeatureGate different from the startup snapshot and asked for a shutdown.",
	})

	// Manifests counts the outcome of every manifest in the last apply run.
	Manifests = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "featuregate_operator_manifests",
		Help: "Manifests by outcome (applied, failed, excluded, skipped, invalid) in the last apply run.",
	}, []string{"result"})

	// ApplyFailures counts failed manifest applies since start.
	ApplyFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "featuregate_operator_manifest_apply_failures_total",
		Help: "Manifest applies that failed since the process started.",
	})

	// LastApplyDuration is how long the last apply run took.
	LastApplyDuration = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "featuregate_operator_last_apply_duration_seconds",
		Help: "Duration of the last run applying the manifest directory.",
	})
)

func init() {
	metrics.Registry.MustRegister(StartupFeatureSet, ShutdownRequests, Manifests, ApplyFailures, LastApplyDuration)
}
