package featuregate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// The guard's parts, for their own tests.
type (
	Startup       = startup
	Stopper       = stopper
	Monitor       = monitor
	DeferredCache = deferredCache
)

// Getter is what a test's startup reads through: a live client, or one
// wrapped to count or hold reads.
type Getter interface {
	Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error
}

// getterSource is a source that reads through a Getter, as the API source
// reads: its errors are described the same way. It cannot follow.
type getterSource struct {
	getter Getter
	name   string
}

func (s getterSource) read(ctx context.Context) (*configv1.FeatureGate, error) {
	fg := &configv1.FeatureGate{}
	if err := s.getter.Get(ctx, client.ObjectKey{Name: s.name}, fg); err != nil {
		return nil, describeReadError(s.name, err)
	}
	return fg, nil
}

func (s getterSource) reconnect() {}

func (s getterSource) follow(context.Context, *configv1.FeatureGate, func(), func(*configv1.FeatureGate) bool) error {
	return errors.New("a test getter cannot follow")
}

// NewStartup is the startup read through r, with o's defaults (EventSource
// is not needed here).
func NewStartup(r Getter, o Options) *Startup {
	return NewStartupAnnouncing(r, o, nil)
}

// NewStartupAnnouncing is NewStartup calling announce once the snapshot is
// published, as the guard's Event and metric are.
func NewStartupAnnouncing(r Getter, o Options, announce func(Snapshot)) *Startup {
	if o.EventSource == "" {
		o.EventSource = "test"
	}
	o, err := o.withDefaults()
	if err != nil {
		panic(err)
	}
	s, err := newStartup(getterSource{getter: r, name: o.Name}, nil, &rest.Config{}, o, eventWriter{}, metrics{})
	if err != nil {
		panic(err)
	}
	// Instead of the guard's Event and metric.
	s.announce = nil
	if announce != nil {
		s.announce = func(_ context.Context, snap Snapshot) { announce(snap) }
	}
	return s
}

// liveGetter reads the way the API source does (a consistent list by name
// on its REST client, no retries), and returns the client's errors as they
// are: an empty list as the NotFound a GET would answer.
type liveGetter struct{ src *apiSource }

func (l liveGetter) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	named := &apiSource{name: key.Name, ownClient: &ownClient{rc: l.src.client()}}
	list, err := named.list(ctx)
	if err != nil {
		return err
	}
	if len(list.Items) == 0 {
		return apierrors.NewNotFound(configv1.Resource("featuregates"), key.Name)
	}
	fg, ok := obj.(*configv1.FeatureGate)
	if !ok {
		return fmt.Errorf("liveGetter reads FeatureGates, not %T", obj)
	}
	list.Items[0].DeepCopyInto(fg)
	return nil
}

// NewLiveGetter is a Getter on the API source's REST client for cfg.
func NewLiveGetter(cfg *rest.Config) (Getter, error) {
	src, err := newAPISource(configDial(cfg, Defaults().FreshnessBound), defaultName)
	if err != nil {
		return nil, err
	}
	return liveGetter{src: src}, nil
}

// APIRead is the API source's read of FeatureGate name, as the guard does it.
func APIRead(cfg *rest.Config, name string) (func(context.Context) (*configv1.FeatureGate, error), error) {
	src, err := newAPISource(configDial(cfg, Defaults().FreshnessBound), name)
	if err != nil {
		return nil, err
	}
	return src.read, nil
}

// NewStopper is a stopper whose Start cancels through cancel (nil: none),
// as the guarded manager's Start arranges.
func NewStopper(cancel context.CancelFunc) *Stopper {
	s := newStopper()
	if cancel != nil {
		s.starting(cancel)
	}
	return s
}

// View is how a snapshot is read, for the snapshot tables: the release
// version and the gates a component watches.
type View struct {
	Version         string
	WatchedGates    []configv1.FeatureGateName
	WatchFeatureSet bool
}

// New builds the view of fg without Read's completeness check, as the
// guard builds a live view; nil is an error.
func New(fg *configv1.FeatureGate, v View) (Snapshot, error) {
	if fg == nil {
		return Snapshot{}, errors.New("no FeatureGate")
	}
	return build(fg, v.Version), nil
}

// Diff is the comparison the guard restarts on, for what v consumes.
func Diff(snapshot, live Snapshot, v View) []string {
	return diff(snapshot, live, consumed{gates: sets.New(v.WatchedGates...), featureSet: v.WatchFeatureSet}).sentences()
}

// SetEntryRewriteTimeout shortens how long a feature-set change waits for
// the status entry.
func SetEntryRewriteTimeout(g *Guard, d time.Duration) { g.comparison.rewriteTimeout = d }

// ReconcilerOf is the guard's FeatureGate reconciler, once NewManager has
// set it up.
func ReconcilerOf(g *Guard) reconcile.Reconciler { return g.reconciler }

// RaiseAlarm is what a failed request of the manager does.
func RaiseAlarm(g *Guard) { g.alarm.raise() }

// StartMonitor runs the monitor alone.
func StartMonitor(ctx context.Context, g *Guard) error { return g.monitor.Start(ctx) }

// StartStartup runs the startup read alone.
func StartStartup(ctx context.Context, g *Guard) error { return g.startup.Start(ctx) }

// FlushEvents waits for the guard's Event writes under way, as the
// manager's Start does before it returns.
func FlushEvents(g *Guard) { g.events.pending.wait(0) }

// Compare is the guard's comparison of fg with the snapshot, as a detector
// named detectedBy makes it.
func Compare(ctx context.Context, g *Guard, fg *configv1.FeatureGate, detectedBy string) bool {
	return g.comparison.compare(ctx, fg, detectedBy)
}

// ReadFunc is one read of the FeatureGate, as a source reads it.
type ReadFunc = func(context.Context) (*configv1.FeatureGate, error)

// hookedSource is a guard's source with test hooks.
type hookedSource struct {
	source
	wrapRead func(ReadFunc) ReadFunc
	deaf     bool
}

func (h hookedSource) read(ctx context.Context) (*configv1.FeatureGate, error) {
	if h.wrapRead == nil {
		return h.source.read(ctx)
	}
	return h.wrapRead(h.source.read)(ctx)
}

func (h hookedSource) reconnect() { h.source.reconnect() }

func (h hookedSource) follow(ctx context.Context, from *configv1.FeatureGate, following func(), seen func(*configv1.FeatureGate) bool) error {
	if !h.deaf {
		return h.source.follow(ctx, from, following, seen)
	}
	following()
	<-ctx.Done()
	return nil
}

// WrapStartupRead makes the startup read through wrap(its read): a test
// sees, holds or follows up each read before the snapshot is published.
// Call it before anything starts.
func WrapStartupRead(g *Guard, wrap func(ReadFunc) ReadFunc) {
	g.startup.src = hookedSource{source: g.startup.src, wrapRead: wrap}
}

// WrapMonitorRead makes the monitor read through wrap(its read). Call it
// before anything starts.
func WrapMonitorRead(g *Guard, wrap func(ReadFunc) ReadFunc) {
	g.monitor.src = hookedSource{source: g.monitor.src, wrapRead: wrap}
}

// DeafenMonitor makes the monitor follow a source that never reports a
// change: it still reads and compares (at start and after each alarm),
// and says it follows, but only the FeatureGate controller sees events.
// Call it before anything starts.
func DeafenMonitor(g *Guard) {
	g.monitor.src = hookedSource{source: g.monitor.src, deaf: true}
}

// NewDeferredCache is the manager's deferred cache, built by build once
// taken is closed, in a manager already started.
func NewDeferredCache(taken <-chan struct{}, build func() (cache.Cache, error), log logr.Logger) *DeferredCache {
	started := make(chan struct{})
	close(started)
	return newDeferredCache(taken, started, build, log)
}

// SetWarnAfter shortens how long startup reads fail before their line is an
// error.
func SetWarnAfter(s *Startup, d time.Duration) { s.warnAfter = d }

// DemandBounds is how many freshness bounds the prover goes on after the
// last ask of Current.
const DemandBounds = demandBounds
