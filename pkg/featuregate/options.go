package featuregate

import (
	"errors"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/events"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Options configures a Guard. EventSource is required unless EventRecorder
// is set; every other zero value means the default that Defaults returns.
type Options struct {
	// Name of the FeatureGate; "cluster" when empty.
	Name string
	// Version is the component's release version. With it, the snapshot
	// carries that version's status.featureGates entry, and the guard is not
	// ready until the entry exists (see Read). Without it only
	// spec.customNoUpgrade names gates, and Enabled says so in the log the
	// first time it is asked. When it is VersionMarker (operators are built
	// with a placeholder until the release payload substitutes the real
	// version), the version is the ClusterVersion "version"'s, as library-go
	// resolves it: status.desired.version, else the newest status.history
	// entry, read live with the same discipline (not ready until read).
	// That version is fixed for the process: an upgrade rolls out a new one.
	Version string
	// VersionMarker is the placeholder version; the default,
	// "0.0.1-snapshot", is the one OpenShift builds use, so an operator
	// built that way sets only Version.
	VersionMarker string
	// WatchedGates, when not empty, narrows which gate changes restart:
	// gates the component does not consume never do. It never changes what
	// Enabled answers. Empty: every gate of the snapshot is consumed.
	WatchedGates []configv1.FeatureGateName
	// WatchFeatureSet is for components that act on spec.featureSet
	// itself, not only through their gates (release manifests included by
	// the release.openshift.io/feature-set annotation, as the
	// cluster-version-operator does): a feature-set change then restarts
	// them too. Without it the feature set's name restarts nothing, as
	// with library-go, and Snapshot.FeatureSetName is information only: a
	// process that started between the admin's spec.featureSet write and
	// cluster-config-operator's rewrite of the status entry holds the new
	// name over the old gates. With it, such a change stops the work at
	// once but holds the exit until the entry is rewritten (10 s at
	// most), so that the next process reads the two together; and a
	// snapshot whose status was last written before its spec (its
	// managedFields say so) is not vouched for, Current false, until a
	// status written since is seen, or two minutes after the spec write
	// (see docs/adopting.md, "Which changes restart").
	WatchFeatureSet bool
	// Setup, when set, runs once the startup snapshot is taken, with the
	// manager NewManager built and that snapshot: the place to add what
	// exists only when a gate is enabled (a controller registered or not),
	// decided from a feature set that was read. What it adds starts like
	// everything else behind the snapshot; an error it returns ends the
	// manager's Start with that error. It runs on every replica, leader or
	// not, once per process (a change of the gates restarts the process),
	// beside the rest: Snapshot may report the snapshot while it still runs.
	Setup func(mgr manager.Manager, snapshot Snapshot) error

	// File, when set, is read instead of the API: a file holding the
	// FeatureGate as YAML or JSON, as a ConfigMap volume presents it
	// (HyperShift renders it so; MicroShift serves no FeatureGate API). The
	// discipline is the same: not ready until it is read, a change of its
	// content stops the manager, and a file that vanishes or stops parsing
	// is reported and waited out, keeping the snapshot.
	File string

	// TLSProfile, when set, makes the cluster's TLS security profile part
	// of the snapshot, with the FeatureGate's discipline: the guard reads
	// the APIServer with the FeatureGate and is not ready until both are
	// read; a change of what the component serves with (the resolved
	// profile, or whether the adherence policy has it honour the profile)
	// stops the manager as a FeatureGate change does; Current vouches for
	// both, with the same freshness bound. Guard.TLSOpts serves it. Nil:
	// the guard neither reads nor watches the APIServer.
	TLSProfile *TLSProfileOptions
	// Parts are the operator's own config objects the snapshot holds,
	// each with the FeatureGate's discipline (see Part and NewPart).
	Parts []Part

	// EventSource is the reporting controller of the guard's Events: the
	// name of the operator that embeds it.
	EventSource string
	// EventRecorder, when set, records the guard's Events (on the
	// FeatureGate: StartupSnapshot, FeatureGateChanged, FeatureGateDeleted)
	// instead of the guard: the operator's own recorder, with its RBAC,
	// its broadcaster and its queue (which may drop the last Event at the
	// restart it announces; the log line never is). It must exist before
	// NewGuard: one from events.NewBroadcaster on an EventsV1 client, not
	// events.NewEventBroadcasterAdapter, which asks discovery and, with
	// the API down at start, falls back to core/v1 Events
	// (docs/adopting.md shows it). When nil, the guard writes
	// events.k8s.io/v1 Events itself (the stop's Event is written while
	// the manager drains, and the manager's Start waits up to 300 ms more
	// for it: an exit is not held on a busy API server for a courtesy; the
	// line "Events not written in time; exiting without them" says so),
	// and needs create on them (config/rbac/role.yaml of this module);
	// without that it logs once and records none.
	EventRecorder events.EventRecorder
	// Registry receives the guard's metrics; controller-runtime's registry,
	// which the manager serves, when nil.
	Registry prometheus.Registerer

	// BackoffCap bounds the wait between startup reads, and so how long
	// after the API returns the snapshot is taken. A read that reached no
	// server (connection refused) costs nothing and is retried after 50 ms,
	// whatever the cap; answers from a server back off up to it.
	BackoffCap time.Duration
	// InitialFetchTimeout, when positive, makes the manager fail after that
	// long without a snapshot, for those who prefer a crash loop. Zero: wait
	// for ever.
	InitialFetchTimeout time.Duration
	// FreshnessBound is how old the guard's proof that the FeatureGate still
	// matches the snapshot may be while Current answers true. Proof is a
	// consistent read, sent every half bound while Current is asked, that
	// matched: only an API server that still reaches etcd answers one, so a
	// silent link, a frozen API server or one cut off from etcd turns
	// Current false within the bound. Reads slower than half the bound make
	// it lapse too. Calls after a quiet spell wait up to half the bound for
	// the read their demand sends.
	FreshnessBound time.Duration
	// ResyncPeriod re-runs the FeatureGate controller's comparison without
	// an event.
	ResyncPeriod time.Duration
	// CacheSyncTimeout bounds the first list of every controller added to
	// the guard's manager, which starts only once the snapshot is taken.
	CacheSyncTimeout time.Duration

	// Logger defaults to controller-runtime's, named "featuregate".
	Logger logr.Logger
}

// Defaults returns the values that zero Options fields take. An operator
// that shows its configuration shows these; they are defined here only.
func Defaults() Options {
	return Options{
		Name:             defaultName,
		VersionMarker:    defaultVersionMarker,
		BackoffCap:       2 * time.Second,
		FreshnessBound:   2 * time.Second,
		ResyncPeriod:     3 * time.Minute,
		CacheSyncTimeout: 2 * time.Minute,
	}
}

const (
	// retryInterval is the wait between reads while the guard cannot vouch
	// for its view (the API down, the file unreadable): a change made
	// meanwhile is seen within about this long of becoming readable.
	retryInterval = 250 * time.Millisecond
	// metricsNamespace prefixes the guard's metric names: the library's,
	// whichever operator embeds it, as controller-runtime's are
	// controller_runtime_*.
	metricsNamespace = "featuregate_guard"
)

// withDefaults validates o and fills in the defaults.
func (o Options) withDefaults() (Options, error) {
	if o.EventSource == "" && o.EventRecorder == nil {
		return o, errors.New("featuregate.Options.EventSource is required (the operator's name, as Events report it) unless Options.EventRecorder records them")
	}
	d := Defaults()
	if o.Name == "" {
		o.Name = d.Name
	}
	if o.VersionMarker == "" {
		o.VersionMarker = d.VersionMarker
	}
	if o.Registry == nil {
		o.Registry = ctrlmetrics.Registry
	}
	o.BackoffCap = orDefault(o.BackoffCap, d.BackoffCap)
	o.FreshnessBound = orDefault(o.FreshnessBound, d.FreshnessBound)
	o.ResyncPeriod = orDefault(o.ResyncPeriod, d.ResyncPeriod)
	o.CacheSyncTimeout = orDefault(o.CacheSyncTimeout, d.CacheSyncTimeout)
	if o.Logger.GetSink() == nil {
		o.Logger = ctrllog.Log.WithName("featuregate")
	}
	return o, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}
