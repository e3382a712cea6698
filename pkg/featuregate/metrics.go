package featuregate

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the guard's: which feature set this process started with,
// how often it asked to stop, and how often its proof lapsed.
type metrics struct {
	startupFeatureSet *prometheus.GaugeVec
	shutdownRequests  prometheus.Counter
	freshnessLapses   prometheus.Counter
}

// newMetrics registers the metrics on reg, reusing ones registered already
// (a second guard in one process, as tests build).
func newMetrics(reg prometheus.Registerer) (metrics, error) {
	m := metrics{
		startupFeatureSet: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metricsNamespace,
			Name:      "startup_feature_set",
			Help:      "The feature set of the FeatureGate snapshot taken at startup (1 for the set in force).",
		}, []string{"feature_set"}),
		shutdownRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace,
			Name:      "shutdown_requests_total",
			Help:      "Comparisons that found the FeatureGate different from the startup snapshot and asked for a shutdown.",
		}),
		freshnessLapses: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace,
			Name:      "freshness_lapses_total",
			Help:      "Times the proof that the FeatureGate still matches the snapshot grew older than the freshness bound (Current false until a read matches again).",
		}),
	}
	var err error
	m.startupFeatureSet, err = register(reg, m.startupFeatureSet)
	if err != nil {
		return metrics{}, err
	}
	if m.shutdownRequests, err = register(reg, m.shutdownRequests); err != nil {
		return metrics{}, err
	}
	m.freshnessLapses, err = register(reg, m.freshnessLapses)
	return m, err
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}
