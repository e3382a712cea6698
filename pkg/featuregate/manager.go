package featuregate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// NewManager builds the controller-runtime manager the guard protects, from
// opts as an operator would give them to ctrl.NewManager, and adds the guard
// to it. What it returns is a manager.Manager like any other, with three
// differences that make an operator written the kubebuilder way safe to
// start while the API is down:
//
//   - Everything added to it, and so every controller built with
//     ctrl.NewControllerManagedBy(mgr), starts only once the startup
//     snapshot is taken and the manager's cache built; only HTTP and
//     webhook servers start at once. A long outage at start never runs out
//     a cache-sync timeout, and nothing acts on a feature set that was not
//     read.
//   - Its cache is built once the snapshot is taken: Cache.ByObject entries
//     and field indexes for the operator's own types need the API to say
//     whether a type is namespaced, and the API answered the snapshot's
//     read. Reads through the cache before Start fail at once with
//     ErrCacheNotStarted, as a stock cache's do, and after it wait for the
//     cache; an informer asked for before Start is an error that says
//     where to ask instead (a stock cache hands one out; this one has none
//     to hand out yet); field indexes registered before
//     (mgr.GetFieldIndexer().IndexField) are recorded, return nil at once
//     (an index already recorded is the conflict stock returns), and are
//     added when the cache is built.
//   - Start returns nil once the guard asked for the stop (the FeatureGate
//     changed), so that the process exits 0 and its restart reads the new
//     value; StopReason says why.
//
// The manager also gets config.openshift.io/v1 in its scheme (the
// client-go scheme too when opts.Scheme is nil, as kubebuilder scaffolds),
// a cache of the one FeatureGate, the readiness check CheckName (served
// on opts.HealthProbeBindAddress, which is off unless set), watch
// errors reported to the guard, and LeaderElectionReleaseOnCancel, so that
// the replacement takes over without waiting out the lease. With leader
// election, the lease is first asked for once the snapshot is taken (the
// lock, opts' own or the one a stock manager builds, waits for it): after
// an outage at start the lease is taken as soon as the API answers, not
// one RetryPeriod after a try that failed. NewManager may be called once
// per guard.
func (g *Guard) NewManager(opts manager.Options) (manager.Manager, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.built {
		return nil, errors.New("featuregate: NewManager called twice on one guard, or after Run")
	}
	g.built = true
	if opts.Scheme == nil {
		opts.Scheme = runtime.NewScheme()
		utilruntime.Must(clientgoscheme.AddToScheme(opts.Scheme))
	}
	utilruntime.Must(configv1.Install(opts.Scheme))
	if g.opts.File == "" {
		byObject := maps.Clone(opts.Cache.ByObject)
		if byObject == nil {
			byObject = map[client.Object]cache.ByObject{}
		}
		byObject[&configv1.FeatureGate{}] = cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", g.opts.Name)}
		opts.Cache.ByObject = byObject
	}
	opts.Cache.DefaultWatchErrorHandler = g.alarm.watchErrorHandler(opts.Cache.DefaultWatchErrorHandler)
	newCache := opts.NewCache
	if newCache == nil {
		newCache = cache.New
	}
	started := make(chan struct{})
	opts.NewCache = func(cfg *rest.Config, o cache.Options) (cache.Cache, error) {
		g.cache = newDeferredCache(g.startup.Taken(), started, func() (cache.Cache, error) { return newCache(cfg, o) }, g.opts.Logger)
		return g.cache, nil
	}
	g.startup.readinessServed = opts.HealthProbeBindAddress != "" && opts.HealthProbeBindAddress != "0"
	if !g.startup.readinessServed {
		g.opts.Logger.Info("Readiness not served: no HealthProbeBindAddress, so nothing outside this process sees it wait for the FeatureGate; serve /readyz to a readinessProbe, or set InitialFetchTimeout to crash-loop instead",
			"check", CheckName, "initialFetchTimeout", g.opts.InitialFetchTimeout.String())
	}
	opts.LeaderElectionReleaseOnCancel = true
	recorders := &managerRecorders{}
	if err := g.holdLease(&opts, recorders); err != nil {
		return nil, err
	}
	if opts.Controller.CacheSyncTimeout == 0 {
		opts.Controller.CacheSyncTimeout = g.opts.CacheSyncTimeout
	}
	mgr, err := manager.New(g.restConfig, opts)
	if err != nil {
		return nil, err
	}
	recorders.Manager = mgr
	gm := &guardedManager{Manager: mgr, guard: g, started: started, stopped: make(chan struct{})}
	if err := g.setup(gm); err != nil {
		return nil, fmt.Errorf("set up the FeatureGate guard: %w", err)
	}
	return gm, nil
}

// setup adds the guard's runnables and readiness check to the manager: the
// startup read and the stop on every replica at once; the monitor, the
// adopter's Setup and, reading the API, the FeatureGate controller once the
// snapshot is taken.
func (g *Guard) setup(gm *guardedManager) error {
	mgr := gm.Manager
	runnables := g.core()
	if g.opts.Setup != nil {
		runnables = append(runnables, g.startup.AfterSnapshot(setupRunnable{guard: g, mgr: gm}))
	}
	if g.opts.File == "" {
		r := &reconciler{
			reader:     mgr.GetClient(),
			name:       g.opts.Name,
			comparison: g.comparison,
			resync:     g.opts.ResyncPeriod,
			log:        g.opts.Logger,
		}
		g.reconciler = r
		c, err := r.controller(mgr)
		if err != nil {
			return fmt.Errorf("FeatureGate controller: %w", err)
		}
		runnables = append(runnables, g.afterCache(c))
	}
	for _, p := range g.parts {
		if mp, ok := p.(managedPart); ok {
			c, err := mp.controller(g, mgr)
			if err != nil {
				return err
			}
			runnables = append(runnables, g.afterCache(c))
		}
	}
	for _, r := range runnables {
		if err := mgr.Add(r); err != nil {
			return err
		}
	}
	return mgr.AddReadyzCheck(CheckName, g.startup.Check)
}

// guardedManager is the manager NewManager returns.
type guardedManager struct {
	manager.Manager
	guard *Guard
	// started is closed when Start is called, stopped when it returns.
	started, stopped chan struct{}
	startOnce        sync.Once
	stopOnce         sync.Once
	elected          elected
}

// GetConfig is the config given to NewGuard, as a stock manager returns
// the one given to it. The manager's own clients use a copy whose failed
// requests tell the guard to prove freshness again; clients built from
// this one do not.
func (m *guardedManager) GetConfig() *rest.Config { return m.guard.config }

// GetCache is the manager's cache, whose WaitForCacheSync waits for the
// snapshot and the cache built from it.
func (m *guardedManager) GetCache() cache.Cache { return heldCache{m.guard.cache} }

// GetClient is the manager's client, whose writes wait for the snapshot
// and are refused once a stop is requested.
func (m *guardedManager) GetClient() client.Client {
	c := m.Manager.GetClient()
	if c == nil {
		return nil // an Options.NewClient that returned none, as stock shows it
	}
	return heldClient{Client: c, guard: m.guard, started: m.started, stopped: m.stopped}
}

// Elected closes once this replica leads (at once without leader election,
// as with a stock manager) and the cache built from the snapshot serves.
func (m *guardedManager) Elected() <-chan struct{} {
	return m.elected.get(m.Manager.Elected(), m.guard.cache.ready, m.stopped)
}

// Add starts r once the snapshot is taken. Servers start at once: they serve
// the probes and webhooks the API may need before anything is read. So do
// caches (a runnable with GetCache, a cluster.Cluster): controller-runtime
// starts them first and waits for their sync before anything else, and
// only as themselves does it know them; an informer acts on nothing, and
// what reads through them starts after the snapshot.
func (m *guardedManager) Add(r manager.Runnable) error {
	switch r.(type) {
	case *manager.Server, webhook.Server, hasCache:
		return m.Manager.Add(r)
	}
	return m.Manager.Add(m.guard.afterCache(r))
}

// hasCache is what controller-runtime's manager starts as a cache.
type hasCache interface {
	GetCache() cache.Cache
}

// Start runs the manager until ctx ends or the guard asks for the stop.
func (m *guardedManager) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m.guard.stopper.starting(cancel)
	m.startOnce.Do(func() { close(m.started) })
	defer m.stopOnce.Do(func() { close(m.stopped) })
	err := m.Manager.Start(ctx)
	m.guard.closeConnections()
	// With a Transport of the caller's the guard keeps no connection:
	// the manager's idle ones at least.
	if hc := m.GetHTTPClient(); hc != nil {
		utilnet.CloseIdleConnectionsFor(hc.Transport)
	}
	return err
}

// closeConnections closes the guard's own connections once its manager
// stopped: nothing of the guard outlives Start.
func (g *Guard) closeConnections() {
	// The Events recorded on the way out announce why it stopped; they
	// were written while the runnables drained, and get a little longer,
	// as do the writes still in flight on the guard's connections (the
	// manager's recorder's Events, a write of the operator's): one budget
	// for both.
	deadline := time.Now().Add(exitEventBudget)
	g.events.flushWithin(exitEventBudget)
	g.conns.settle(time.Until(deadline))
	// Every connection the guard dialed, idle, in use or not pooled yet
	// (the FeatureGate reads' own transports included).
	g.conns.closeAll()
	// With a Transport of the caller's the guard dialed none: the idle
	// ones at least; closing them costs the caller's clients a dial at
	// most.
	utilnet.CloseIdleConnectionsFor(g.eventConns.Transport)
}

// exitEventBudget is how long Start waits, once the manager has drained,
// for Events still being written: an idle API server answers in
// milliseconds; one busy with a restart stampede can take a second, and
// the exit is not held for it (the log line says what the Event would).
const exitEventBudget = 300 * time.Millisecond

// afterCache starts r once the snapshot is taken and the cache built from
// it serves: a controller's cache-sync timeout then covers its informers'
// sync, as with a stock manager, and not the cache's build (discovery of
// every Cache.ByObject type, which an API server that has just returned can
// take seconds to answer).
func (g *Guard) afterCache(r manager.Runnable) manager.Runnable {
	held := &afterSnapshot{taken: g.cache.ready, runnable: r}
	if w, ok := r.(warmupRunnable); ok {
		// Kept a warmup runnable (a controller with EnableWarmup): its
		// Warmup is held until the cache is built too, and runs whether
		// or not this replica leads, as controller-runtime runs it.
		return &afterSnapshotWarmup{afterSnapshot: held, warmup: w}
	}
	return held
}

// warmupRunnable is what controller-runtime warms up before it leads.
type warmupRunnable interface {
	Warmup(context.Context) error
}

// afterSnapshotWarmup is an afterSnapshot whose Warmup waits too.
type afterSnapshotWarmup struct {
	*afterSnapshot
	warmup warmupRunnable
}

func (a *afterSnapshotWarmup) Warmup(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-a.taken:
	}
	return a.warmup.Warmup(ctx)
}

// setupRunnable runs Options.Setup with the snapshot, on every replica.
type setupRunnable struct {
	guard *Guard
	mgr   manager.Manager
}

func (s setupRunnable) NeedLeaderElection() bool { return false }

// Start runs Setup on a manager whose Add keeps what it is given until
// Setup returns: on a running manager an added controller starts at once,
// and a SetupWithManager that sets its reconciler's fields after
// Complete() (a common shape) would race with it. As on a stock manager,
// nothing added in Setup starts before Setup is done.
func (s setupRunnable) Start(context.Context) error {
	snap, _ := s.guard.startup.Snapshot() // taken: it runs after the snapshot
	held := &addedInSetup{Manager: s.mgr}
	if err := s.guard.opts.Setup(held, snap); err != nil {
		return fmt.Errorf("featuregate Options.Setup: %w", err)
	}
	for _, r := range held.added {
		if err := s.mgr.Add(r); err != nil {
			return fmt.Errorf("featuregate Options.Setup: add: %w", err)
		}
	}
	return nil
}

// addedInSetup is the manager Setup is given: Add keeps the runnables,
// which setupRunnable adds to the running manager once Setup returned.
type addedInSetup struct {
	manager.Manager
	added []manager.Runnable
}

func (a *addedInSetup) Add(r manager.Runnable) error {
	a.added = append(a.added, r)
	return nil
}
