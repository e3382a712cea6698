package featuregate

import (
	"context"
	"errors"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	"github.com/prometheus/client_golang/prometheus"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Defaults for the zero values of Options.
const (
	// DefaultBackoffCap bounds the wait between startup reads, and so how
	// long after the API returns the snapshot is taken.
	DefaultBackoffCap = 2 * time.Second
	// DefaultResyncPeriod is how often the FeatureGate is compared without
	// an event, in case a broken watch missed one.
	DefaultResyncPeriod = 3 * time.Minute
	// DefaultCacheSyncTimeout bounds the FeatureGate cache's first list,
	// which starts only once the snapshot is taken.
	DefaultCacheSyncTimeout = 2 * time.Minute
	// DefaultVerifyInterval is the wait between live reads while the API is
	// in trouble.
	DefaultVerifyInterval = 500 * time.Millisecond
	// DefaultMetricsNamespace prefixes the guard's metric names.
	DefaultMetricsNamespace = "featuregate_operator"
)

// Options configures a Guard. EventSource and Cancel are required; the
// rest has defaults.
type Options struct {
	// Name of the FeatureGate; DefaultName when empty.
	Name string
	// Version is the component's release version; see View.Version.
	// Without it, Enabled knows only spec.customNoUpgrade gates, and says
	// so in the log the first time it is asked.
	Version string
	// WatchedGates narrows which gate changes restart; see View.
	WatchedGates []configv1.FeatureGateName

	// EventSource is the reporting controller of the guard's Events: the
	// name of the operator that embeds it.
	EventSource string
	// Cancel cancels the context given to the manager's Start: the guard
	// calls it to stop the process once the FeatureGate changed.
	Cancel context.CancelFunc

	// Registry receives the guard's two metrics; controller-runtime's
	// registry (served by the manager) when nil.
	Registry prometheus.Registerer
	// MetricsNamespace prefixes their names; DefaultMetricsNamespace when
	// empty.
	MetricsNamespace string

	// OnSnapshot, when set, is called once with the startup snapshot, before
	// anything waiting for it starts.
	OnSnapshot func(Snapshot)
	// OnChange, when set, is called once a difference is found, just after
	// the stop is requested (StopRequested is closed), while the manager
	// shuts down: Start does not return before it does.
	OnChange func(Change)

	// BackoffCap bounds the wait between startup reads.
	BackoffCap time.Duration
	// InitialFetchTimeout, when positive, makes the manager fail after that
	// long without a snapshot, for those who prefer a crash loop.
	InitialFetchTimeout time.Duration
	// ResyncPeriod re-runs the comparison without an event.
	ResyncPeriod time.Duration
	// CacheSyncTimeout bounds the FeatureGate cache's first list.
	CacheSyncTimeout time.Duration
	// VerifyInterval is the wait between live reads after a watch failure.
	VerifyInterval time.Duration

	// Logger defaults to controller-runtime's, named "featuregate".
	Logger logr.Logger
}

// Change is what OnChange is told.
type Change struct {
	// Diff is Diff(startup, live): one sentence per change.
	Diff []string
	// DetectedBy names the path that saw it: "reconcile", "verify" (a live
	// read after a watch failure) or "check" (Guard.Current).
	DetectedBy string
	Startup    Snapshot
	Live       Snapshot
}

// withDefaults validates o and fills in the defaults.
func (o Options) withDefaults() (Options, error) {
	var errs []error
	if o.EventSource == "" {
		errs = append(errs, errors.New("featuregate.Options.EventSource is required (the operator's name, as Events report it)"))
	}
	if o.Cancel == nil {
		errs = append(errs, errors.New("featuregate.Options.Cancel is required (it cancels the context given to mgr.Start)"))
	}
	if err := errors.Join(errs...); err != nil {
		return o, err
	}
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Registry == nil {
		o.Registry = ctrlmetrics.Registry
	}
	if o.MetricsNamespace == "" {
		o.MetricsNamespace = DefaultMetricsNamespace
	}
	o.BackoffCap = orDefault(o.BackoffCap, DefaultBackoffCap)
	o.ResyncPeriod = orDefault(o.ResyncPeriod, DefaultResyncPeriod)
	o.CacheSyncTimeout = orDefault(o.CacheSyncTimeout, DefaultCacheSyncTimeout)
	o.VerifyInterval = orDefault(o.VerifyInterval, DefaultVerifyInterval)
	if o.Logger.GetSink() == nil {
		o.Logger = ctrllog.Log.WithName("featuregate")
	}
	return o, nil
}

func (o Options) view() View { return View{Version: o.Version, WatchedGates: o.WatchedGates} }

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
