package featuregate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sync"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// The guard reads the FeatureGate and writes Events about it; an operator
// adopting it needs these rules too.
// +kubebuilder:rbac:groups=config.openshift.io,resources=featuregates,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// CheckName is the readiness check the guard adds: /readyz/featuregate.
const CheckName = "featuregate"

// Guard is the whole FeatureGate discipline for one controller-runtime
// manager: the live startup read behind readiness, the snapshot, the
// level-triggered FeatureGate controller, the outage verifier, the one
// comparison, and the stop. Build it with NewGuard before the manager,
// which it hooks (ManagerOptions, RESTConfig), then add it with
// SetupWithManager.
type Guard struct {
	opts       Options
	restConfig *rest.Config
	live       getter
	alarm      alarm
	startup    *startup
	stopper    *stopper
	comparison *comparison

	mu         sync.Mutex
	reconciler *reconciler

	noVersionOnce sync.Once
}

// NewGuard builds a guard reading through cfg. Nothing is read until the
// manager starts.
func NewGuard(cfg *rest.Config, opts Options) (*Guard, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	live, err := newLiveGetter(cfg)
	if err != nil {
		return nil, err
	}
	events, err := newEventClient(cfg)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registry, opts.MetricsNamespace)
	if err != nil {
		return nil, fmt.Errorf("register FeatureGate metrics: %w", err)
	}
	writer := newEventWriter(events, opts.EventSource)
	announce := func(ctx context.Context, s Snapshot) {
		ref := &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: opts.Name}}
		if err := writer.record(ctx, ref, corev1.EventTypeNormal, ReasonStartupSnapshot, "Snapshot", "Startup feature set "+s.String()); err != nil {
			opts.Logger.Error(err, "Event not recorded", "featureGate", opts.Name, "reason", ReasonStartupSnapshot)
		}
	}
	userHook := opts.OnSnapshot
	opts.OnSnapshot = func(s Snapshot) {
		m.startupFeatureSet.WithLabelValues(s.FeatureSetName()).Set(1)
		if userHook != nil {
			userHook(s)
		}
	}
	g := &Guard{opts: opts, live: live, alarm: newAlarm(), stopper: newStopper(opts.Cancel), startup: newStartup(live, opts, announce)}
	g.comparison = &comparison{startup: g.startup, stopper: g.stopper, events: writer, metrics: m, onChange: opts.OnChange, log: opts.Logger}
	g.restConfig = rest.CopyConfig(cfg)
	g.restConfig.Wrap(g.alarm.wrapTransport)
	return g, nil
}

// RESTConfig is the configuration to build the manager with: the caller's,
// with a transport that tells the guard when the API is in trouble.
func (g *Guard) RESTConfig() *rest.Config { return rest.CopyConfig(g.restConfig) }

// ManagerOptions returns opts with what the guard needs of the manager:
// config.openshift.io/v1 in the scheme, a REST mapper that knows the
// FeatureGate without asking the API (the manager must start while the API
// is down), a cache holding only our FeatureGate, watch errors reported to
// the guard, and the lease released at once on a requested stop, so that the
// replacement takes over without waiting out the lease.
func (g *Guard) ManagerOptions(opts manager.Options) manager.Options {
	if opts.Scheme == nil {
		opts.Scheme = runtime.NewScheme()
		utilruntime.Must(clientgoscheme.AddToScheme(opts.Scheme))
	}
	utilruntime.Must(configv1.Install(opts.Scheme))
	opts.MapperProvider = mapperProvider(opts.MapperProvider)
	byObject := maps.Clone(opts.Cache.ByObject)
	if byObject == nil {
		byObject = map[client.Object]cache.ByObject{}
	}
	byObject[&configv1.FeatureGate{}] = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", g.opts.Name)}
	opts.Cache.ByObject = byObject
	opts.Cache.DefaultWatchErrorHandler = g.alarm.watchErrorHandler(opts.Cache.DefaultWatchErrorHandler)
	opts.LeaderElectionReleaseOnCancel = true
	return opts
}

// SetupWithManager adds the guard to mgr: the startup read and the stop
// (on every replica), the readiness check CheckName, and, once the snapshot
// is taken, the FeatureGate controller and the outage verifier.
func (g *Guard) SetupWithManager(mgr manager.Manager) error {
	return g.setup(mgr, mgr.GetCache())
}

// setup is SetupWithManager with the reconciler reading through reader.
func (g *Guard) setup(mgr manager.Manager, reader client.Reader) error {
	r := &reconciler{
		reader:     reader,
		name:       g.opts.Name,
		comparison: g.comparison,
		events:     g.comparison.events,
		resync:     g.opts.ResyncPeriod,
		log:        g.opts.Logger,
	}
	c, err := r.controller(mgr, g.opts.CacheSyncTimeout)
	if err != nil {
		return fmt.Errorf("FeatureGate controller: %w", err)
	}
	for _, runnable := range []manager.Runnable{g.startup, g.stopper, g.AfterSnapshot(c), g.AfterSnapshot(g.verifier())} {
		if err := mgr.Add(runnable); err != nil {
			return err
		}
	}
	if err := mgr.AddReadyzCheck(CheckName, g.startup.Check); err != nil {
		return err
	}
	g.mu.Lock()
	g.reconciler = r
	g.mu.Unlock()
	return nil
}

// verifier reads live after the alarm is raised.
func (g *Guard) verifier() *verifier {
	return &verifier{reader: g.live, name: g.opts.Name, alarm: g.alarm, comparison: g.comparison, interval: g.opts.VerifyInterval, log: g.opts.Logger}
}

// AfterSnapshot returns r started only once the snapshot is taken: anything
// that acts on the snapshot goes through here. Leader election is r's own
// choice.
func (g *Guard) AfterSnapshot(r manager.Runnable) manager.Runnable { return g.startup.AfterSnapshot(r) }

// Snapshot returns the startup snapshot once it has been taken.
func (g *Guard) Snapshot() (Snapshot, bool) { return g.startup.Snapshot() }

// Taken is closed once the startup snapshot has been taken.
func (g *Guard) Taken() <-chan struct{} { return g.startup.Taken() }

// Enabled reports whether gate is enabled in the startup snapshot; false
// before it is taken (wait for Taken). Without a Version only
// spec.customNoUpgrade names gates: the first such question is logged.
func (g *Guard) Enabled(gate configv1.FeatureGateName) bool {
	s, ok := g.startup.Snapshot()
	if !ok {
		return false
	}
	if !s.HasGateLists() && s.FeatureSet() != configv1.CustomNoUpgrade {
		g.noVersionOnce.Do(func() {
			g.opts.Logger.Info("Feature gate asked for without a release version; only customNoUpgrade gates are known, so it reads as disabled",
				"gate", gate, "featureSet", s.FeatureSetName())
		})
	}
	return s.Enabled(gate)
}

// KnownFeatures lists the gates the startup snapshot has a state for.
func (g *Guard) KnownFeatures() []configv1.FeatureGateName {
	s, _ := g.startup.Snapshot()
	return s.KnownFeatures()
}

// Current is the last look before acting on the snapshot: it compares the
// FeatureGate in the manager's cache with the snapshot (asking for the stop
// if they differ, as any reconcile would) and reports whether the snapshot
// still holds and no stop was requested.
func (g *Guard) Current(ctx context.Context) (bool, error) {
	select {
	case <-g.stopper.Requested():
		return false, nil
	default:
	}
	if _, ok := g.startup.Snapshot(); !ok {
		return false, nil
	}
	g.mu.Lock()
	r := g.reconciler
	g.mu.Unlock()
	if r == nil {
		return false, errors.New("featuregate: Current called before SetupWithManager")
	}
	return r.current(ctx)
}

// StopRequested is closed once the guard asked for the stop: work that acts
// on the snapshot stops when it closes.
func (g *Guard) StopRequested() <-chan struct{} { return g.stopper.Requested() }

// StopReason is why the guard asked for the stop, and whether it did; after
// mgr.Start returns it tells a requested stop from a signal.
func (g *Guard) StopReason() (string, bool) { return g.stopper.Reason() }

// Check is the readiness check SetupWithManager adds.
func (g *Guard) Check(req *http.Request) error { return g.startup.Check(req) }

// newEventClient writes events.k8s.io/v1 Events without discovery.
func newEventClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(eventsv1.AddToScheme(scheme))
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{eventsv1.SchemeGroupVersion})
	mapper.Add(eventsv1.SchemeGroupVersion.WithKind("Event"), meta.RESTScopeNamespace)
	c, err := client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper})
	if err != nil {
		return nil, fmt.Errorf("event client: %w", err)
	}
	return c, nil
}
