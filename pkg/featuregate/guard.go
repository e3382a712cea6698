package featuregate

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The guard reads the FeatureGate and writes Events about it; an operator
// adopting it needs these rules too.
// +kubebuilder:rbac:groups=config.openshift.io,resources=featuregates,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// CheckName is the readiness check the guard adds: /readyz/featuregate says
// why the process is not ready yet.
const CheckName = "featuregate"

// Gates is what code that acts on the feature set needs of the guard. A
// reconciler depends on Gates, not on *Guard, so that its unit tests can
// give it featuregatetest.Gates instead.
type Gates interface {
	// Enabled reports whether gate is enabled in the startup snapshot;
	// false before it is taken.
	Enabled(gate configv1.FeatureGateName) bool
	// Current is the last look before acting: true only when the snapshot
	// is taken, no stop is requested, and the guard can vouch that the
	// FeatureGate still matches it. A false answer is a reason to wait
	// (requeue), never to act.
	Current() bool
	// Snapshot returns the startup snapshot once it has been taken.
	Snapshot() (Snapshot, bool)
	// StopRequested is closed once a change was found and the manager is
	// stopping: work in progress ends when it closes.
	StopRequested() <-chan struct{}
}

// Guard is the whole FeatureGate discipline for one controller-runtime
// manager: the startup read behind readiness, the snapshot, the
// level-triggered FeatureGate controller, the monitor that vouches for the
// snapshot, and the stop. NewManager builds the manager around it.
type Guard struct {
	opts Options
	// config is the caller's, as GetConfig returns it; restConfig the
	// manager's copy, whose failed requests raise the alarm.
	config     *rest.Config
	restConfig *rest.Config
	src        source
	alarm      alarm
	startup    *startup
	stopper    *stopper
	comparison *comparison
	monitor    *monitor
	// reconciler is the FeatureGate controller's, once NewManager has set
	// it up (reading the API); tests call it directly.
	reconciler *reconciler
	// cache is the manager's, built once the snapshot is taken.
	cache *deferredCache
	// parts are the snapshot's besides the FeatureGate (part.go); tls is
	// the TLS profile's, when Options.TLSProfile asks for it, for TLSOpts.
	parts []part
	tls   *tlsPart
	// events writes the guard's Events; the manager's Start waits for them
	// within a budget (exitEventBudget). eventConns is its HTTP client.
	events     eventWriter
	eventConns *http.Client
	// conns is every connection dialed through the guard's configs.
	conns *connSet

	mu    sync.Mutex
	built bool

	noVersionOnce sync.Once
}

var _ Gates = &Guard{}

// NewGuard builds a guard reading the FeatureGate through cfg (or
// Options.File). Nothing is read until the manager starts.
func NewGuard(cfg *rest.Config, opts Options) (*Guard, error) {
	if cfg == nil {
		// As manager.New says it, at call time.
		return nil, errors.New("featuregate: must specify Config")
	}
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	// Every connection of the guard's is dialed through own (the
	// FeatureGate reads' own transport) or shared (every other client's),
	// for Start to close them all (conns.go).
	conns := newConnSet()
	own, shared, err := conns.configs(cfg)
	if err != nil {
		return nil, err
	}
	var src source
	if opts.File != "" {
		src = newFileSource(opts.File, 0, 0)
	}
	// The FeatureGate's reads and the TLS profile's each have a client
	// on connections of their own (apisource.go).
	reads := configDial(own, opts.FreshnessBound)
	var tlsReads *ownClient
	if opts.File == "" {
		if src, err = newAPISource(reads, opts.Name); err != nil {
			return nil, err
		}
	}
	if opts.TLSProfile != nil {
		if tlsReads, err = newOwnClient(reads); err != nil {
			return nil, fmt.Errorf("APIServer reads: %w", err)
		}
	}
	events, eventConns, err := newEventClient(shared)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registry)
	if err != nil {
		return nil, fmt.Errorf("register FeatureGate metrics: %w", err)
	}
	writer := newEventWriter(events, opts.EventRecorder, opts.EventSource, opts.Logger)
	stop := newStopper()
	g := &Guard{opts: opts, src: src, conns: conns, eventConns: eventConns, alarm: newAlarm(), stopper: stop, events: writer}
	if opts.TLSProfile != nil {
		if g.tls, err = newTLSPart(tlsReads, *opts.TLSProfile, opts, stop, writer, m); err != nil {
			return nil, err
		}
		g.parts = append(g.parts, g.tls)
	}
	for _, p := range opts.Parts {
		op, err := p.newPart(own, opts, stop, writer, m)
		if err != nil {
			return nil, err
		}
		g.parts = append(g.parts, op)
	}
	if g.startup, err = newStartup(src, g.parts, shared, opts, writer, m); err != nil {
		return nil, err
	}
	g.comparison = &comparison{startup: g.startup, stopper: stop,
		consumed: consumed{gates: sets.New(opts.WatchedGates...), featureSet: opts.WatchFeatureSet},
		read:     src.read, rewriteTimeout: entryRewriteTimeout,
		events: writer, metrics: m, log: opts.Logger}
	if opts.WatchFeatureSet {
		g.comparison.entry = &entryCheck{wait: entryRewriteWait, log: opts.Logger}
		g.startup.taking = g.comparison.entry.taken
	}
	g.monitor = newMonitor(src, g.parts, opts.Name, g.alarm, g.comparison, opts.FreshnessBound, opts.Logger)
	g.config = cfg
	g.restConfig = rest.CopyConfig(shared)
	g.restConfig.Wrap(g.alarm.wrapTransport)
	return g, nil
}

// Snapshot returns the startup snapshot once it has been taken.
func (g *Guard) Snapshot() (Snapshot, bool) { return g.startup.Snapshot() }

// Enabled reports whether gate is enabled in the startup snapshot; false
// before it is taken. Without a Version only spec.customNoUpgrade names
// gates: the first such question is logged.
func (g *Guard) Enabled(gate configv1.FeatureGateName) bool {
	s, ok := g.startup.Snapshot()
	if !ok {
		return false
	}
	if s.version == "" && s.featureSet != configv1.CustomNoUpgrade {
		g.noVersionOnce.Do(func() {
			g.opts.Logger.Info("Feature gate asked for without a release version; only customNoUpgrade gates are known, so it reads as disabled",
				"gate", gate, "featureSet", s.FeatureSetName())
		})
	}
	return s.Enabled(gate)
}

// Current is the last look before acting on the snapshot. It is true only
// when the snapshot is taken, no stop is requested, and the guard follows
// the FeatureGate now (a watch from a live read that matched the snapshot,
// or the file): it is false from the moment the guard loses track (an API
// outage, a watch that ended, a request of the manager that got no answer,
// an unreadable file) until a new live read has matched. While it is asked
// it costs a few atomic operations and reads nothing itself; the proof it
// needs is kept only while something asks, so the calls that come after a
// quiet spell (no call for 5 freshness bounds) wait for the one consistent
// read their demand sends, at most half the bound, before they answer.
func (g *Guard) Current() bool {
	select {
	case <-g.stopper.Requested():
		return false
	default:
	}
	if _, ok := g.startup.Snapshot(); !ok {
		return false
	}
	if g.comparison.entry.pending(time.Now()) {
		return false
	}
	return g.monitor.Current()
}

// StopRequested is closed once the guard asked for the stop: work that acts
// on the snapshot stops when it closes.
func (g *Guard) StopRequested() <-chan struct{} { return g.stopper.Requested() }

// SnapshotTaken is closed once the startup snapshot is taken. A component
// run with Run waits on it instead of asking Snapshot in a loop (library-go's
// InitialFeatureGatesObserved is built on it); with NewManager, the
// runnables held behind the guard wait on the same moment.
func (g *Guard) SnapshotTaken() <-chan struct{} { return g.startup.Taken() }

// StopReason is why the guard asked for the stop, and whether it did; after
// the manager's Start returns it tells a requested stop from a signal.
func (g *Guard) StopReason() (string, bool) { return g.stopper.Reason() }

// newEventClient writes events.k8s.io/v1 Events without discovery; its
// HTTP client is returned too, for its connections to be closed once the
// manager stopped.
func newEventClient(cfg *rest.Config) (client.Client, *http.Client, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(eventsv1.AddToScheme(scheme))
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{eventsv1.SchemeGroupVersion})
	mapper.Add(eventsv1.SchemeGroupVersion.WithKind("Event"), meta.RESTScopeNamespace)
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("event client: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper, HTTPClient: hc})
	if err != nil {
		return nil, nil, fmt.Errorf("event client: %w", err)
	}
	return c, hc, nil
}
