package librarygo

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	configclient "github.com/openshift/client-go/config/clientset/versioned"
	"github.com/openshift/library-go/pkg/operator/configobserver/featuregates"
	"github.com/openshift/library-go/pkg/operator/events"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// Access is a library-go FeatureGateAccess run by the guard. It keeps
// library-go's contract where the guard's rule allows, and is stricter
// where library-go would act on a feature set it did not read or cannot
// vouch for:
//
//   - InitialFeatureGatesObserved closes once a consistent read of the
//     FeatureGate (and, with the version marker, the ClusterVersion) found
//     the component's version entry; an informer's cache never counts.
//   - CurrentFeatureGates answers from that startup snapshot for the whole
//     process: a change does not update it, it ends the process.
//   - The change handler is called as library-go calls it (once with no
//     Previous when the gates are first observed, then on a change with
//     Previous set), but a change is what the guard's restart rule says
//     it is, and it is called once, after the guard has stopped following
//     the FeatureGate and closed its connections.
//   - Current says whether the snapshot is still proven current, and Check
//     is a health check that fails until the snapshot is taken.
type Access struct {
	guard    *featuregate.Guard
	name     string
	cfg      *rest.Config
	observed chan struct{}
	once     sync.Once

	mu      sync.Mutex
	handler featuregates.FeatureGateChangeHandlerFunc
	started bool
	initial featuregates.Features
}

var _ featuregates.FeatureGateAccess = &Access{}

// Option is an option of NewFeatureGateAccess: WithGuardOptions, ReportTo.
type Option func(*options)

type options struct {
	guard     []func(*featuregate.Options)
	readiness *Readiness
}

// WithGuardOptions changes the guard's options before it is built:
// WatchedGates to restart only on the gates the component consumes, File
// for a FeatureGate rendered into a file (HyperShift), FreshnessBound,
// InitialFetchTimeout. Setup and TLSProfile need a manager and are refused.
func WithGuardOptions(edit func(*featuregate.Options)) Option {
	return func(o *options) { o.guard = append(o.guard, edit) }
}

// NewFeatureGateAccess replaces library-go's featuregates.NewFeatureGateAccess:
// the same version, marker and recorder, and the rest.Config the operator's
// clients are built from in place of the two informers (the guard reads
// the FeatureGate and the ClusterVersion itself, live). desiredVersion is
// the component's release version, or missingVersionMarker for the
// ClusterVersion's, resolved as library-go resolves it. The guard's Events
// go through recorder, with library-go's reasons (FeatureGatesInitialized,
// FeatureGatesModified); its metrics to the registry controllercmd serves
// (legacyregistry); its log to klog.
func NewFeatureGateAccess(cfg *rest.Config, desiredVersion, missingVersionMarker string, recorder events.Recorder, opts ...Option) (*Access, error) {
	if recorder == nil {
		return nil, errors.New("librarygo: a nil events.Recorder: pass the operator's (controllerContext.EventRecorder)")
	}
	o := featuregate.Options{
		Version:       desiredVersion,
		VersionMarker: missingVersionMarker,
		EventRecorder: eventsTo{recorder},
		Registry:      legacyregistry.Registerer(),
		Logger:        klog.Background().WithName("featuregate"),
	}
	var own options
	for _, opt := range opts {
		opt(&own)
	}
	for _, edit := range own.guard {
		edit(&o)
	}
	if o.Setup != nil || o.TLSProfile != nil {
		return nil, errors.New("librarygo: Options.Setup and Options.TLSProfile need a controller-runtime manager (featuregate.Guard.NewManager)")
	}
	g, err := featuregate.NewGuard(cfg, o)
	if err != nil {
		return nil, err
	}
	name := o.Name
	if name == "" {
		name = featuregate.Defaults().Name
	}
	a := &Access{guard: g, name: name, cfg: rest.CopyConfig(cfg), observed: make(chan struct{}), handler: featuregates.ForceExit}
	if own.readiness != nil {
		own.readiness.access.Store(a)
	}
	return a, nil
}

// SetChangeHandler replaces the handler called when the gates are first
// observed (Previous nil) and when they change; library-go's ForceExit,
// which exits 0 on a change, by default. As with library-go, it panics
// once Run has been called.
func (a *Access) SetChangeHandler(fn featuregates.FeatureGateChangeHandlerFunc) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started {
		panic("programmer error, cannot update the change handler after starting")
	}
	a.handler = fn
}

// Run reads the FeatureGate, retrying while the API cannot answer, then
// follows it and proves it fresh until ctx ends. On a change it calls the
// handler once, after the guard has stopped, and then, as library-go's
// Run, returns when ctx ends.
func (a *Access) Run(ctx context.Context) {
	a.mu.Lock()
	if a.started {
		a.mu.Unlock()
		klog.Background().Error(nil, "FeatureGateAccess run twice; the second Run does nothing")
		return
	}
	a.started = true
	a.mu.Unlock()

	ran := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-a.guard.SnapshotTaken():
			a.observe()
		case <-ran:
		}
	})
	err := a.guard.Run(ctx)
	close(ran)
	wg.Wait()
	if _, ok := a.guard.Snapshot(); ok {
		a.observe() // taken as Run returned: the select may have seen ran first
	}
	if err != nil {
		klog.Background().Error(err, "FeatureGate guard ended", "featureGate", a.name)
	} else if reason, stopped := a.guard.StopReason(); stopped && a.AreInitialFeatureGatesObserved() {
		a.changed(ctx, reason)
	}
	<-ctx.Done()
}

// observe publishes the startup snapshot as library-go's first
// observation: the channel closes and the handler is called with no
// Previous.
func (a *Access) observe() {
	a.once.Do(func() {
		snap, _ := a.guard.Snapshot()
		a.mu.Lock()
		defer a.mu.Unlock()
		a.initial = features(snap)
		close(a.observed)
		a.handler(featuregates.FeatureChange{New: a.initial})
	})
}

// newReadTimeout bounds the read that fills FeatureChange.New: the exit the
// default handler makes is not held on a slow API server.
const newReadTimeout = time.Second

// changed calls the handler for the change that stopped the guard. New is
// the version's entry as one more read finds it; when that read fails, or
// the entry is not rewritten yet (a feature-set change the guard saw in
// the spec), New is Previous's lists: the change is in the log line and
// the Event, and a handler must not read "New equals Previous" as no
// change.
func (a *Access) changed(ctx context.Context, reason string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	previous := a.initial
	next, err := a.read(ctx)
	if err != nil {
		klog.Background().Info("FeatureGate not read after the change; the change handler gets the startup gates as New", "featureGate", a.name, "error", err.Error())
		next = previous
	}
	klog.Background().Info("Calling the feature gate change handler", "featureGate", a.name, "reason", reason)
	a.handler(featuregates.FeatureChange{Previous: &previous, New: next})
}

// read reads the component's entry once, live.
func (a *Access) read(ctx context.Context) (featuregates.Features, error) {
	snap, _ := a.guard.Snapshot()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), newReadTimeout)
	defer cancel()
	hc, err := rest.HTTPClientFor(a.cfg)
	if err != nil {
		return featuregates.Features{}, err
	}
	defer hc.CloseIdleConnections()
	c, err := configclient.NewForConfigAndClient(a.cfg, hc)
	if err != nil {
		return featuregates.Features{}, err
	}
	fg, err := c.ConfigV1().FeatureGates().Get(ctx, a.name, metav1.GetOptions{})
	if err != nil {
		return featuregates.Features{}, err
	}
	live, err := featuregate.Read(fg, snap.Version())
	if err != nil {
		return featuregates.Features{}, err
	}
	return features(live), nil
}

// features is a snapshot's gates as library-go's Features, each list
// sorted by name (library-go keeps the entry's order).
func features(s featuregate.Snapshot) featuregates.Features {
	var f featuregates.Features
	known := s.KnownFeatures()
	slices.Sort(known)
	for _, gate := range known {
		if s.Enabled(gate) {
			f.Enabled = append(f.Enabled, gate)
		} else {
			f.Disabled = append(f.Disabled, gate)
		}
	}
	return f
}

// InitialFeatureGatesObserved closes once the startup snapshot is taken.
func (a *Access) InitialFeatureGatesObserved() <-chan struct{} { return a.observed }

// AreInitialFeatureGatesObserved reports whether InitialFeatureGatesObserved
// has closed.
func (a *Access) AreInitialFeatureGatesObserved() bool {
	select {
	case <-a.observed:
		return true
	default:
		return false
	}
}

// CurrentFeatureGates returns the startup snapshot, a featuregates.FeatureGate
// (an unlisted gate reads as disabled, where library-go's panics), or
// library-go's error before it is taken.
func (a *Access) CurrentFeatureGates() (featuregates.FeatureGate, error) {
	if !a.AreInitialFeatureGatesObserved() {
		return nil, fmt.Errorf("featureGates not yet observed")
	}
	snap, _ := a.guard.Snapshot()
	return snap, nil
}

// Current is the last look before a controller acts on the gates: true
// only while the guard can vouch that the FeatureGate still matches the
// snapshot (featuregate.Guard.Current). False is a reason to requeue.
func (a *Access) Current() bool { return a.guard.Current() }

// Name and Check make the Access a health check for controllercmd's
// WithHealthChecks (k8s.io/apiserver's healthz.HealthChecker): it fails,
// saying why, until the startup snapshot is taken.
func (a *Access) Name() string { return featuregate.CheckName }

// Check fails until the startup snapshot is taken.
func (a *Access) Check(req *http.Request) error { return a.guard.Check(req) }

// Snapshot is the startup snapshot, for what the FeatureGateAccess interface
// does not carry (the feature set's name, the version it was read for).
func (a *Access) Snapshot() (featuregate.Snapshot, bool) { return a.guard.Snapshot() }
