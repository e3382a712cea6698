package controllers

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	// Manifests counts the outcome of every manifest in the last apply run.
	Manifests = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "featuregate_operator_manifests",
		Help: "Manifests by outcome (applied, failed, excluded, skipped, invalid) in the last apply run; unchanged: the applied ones found as last applied and not sent again.",
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

// RegisterMetrics registers the Applier's metrics on reg; main calls it
// with the manager's registry.
func RegisterMetrics(reg prometheus.Registerer) error {
	var errs []error
	for _, c := range []prometheus.Collector{Manifests, ApplyFailures, LastApplyDuration} {
		errs = append(errs, reg.Register(c))
	}
	return errors.Join(errs...)
}
