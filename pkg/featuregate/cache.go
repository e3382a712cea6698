package featuregate

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// deferredCache is the manager's cache, built once the snapshot is taken.
// Building a cache asks the API whether each Cache.ByObject type is
// namespaced, and so does adding a field index: with the API down at start
// the manager could not even be built. By the time the snapshot is taken
// the API has answered, and nothing reads through the cache before then:
// everything that does starts after the snapshot.
type deferredCache struct {
	taken <-chan struct{}
	build func() (cache.Cache, error)
	log   logr.Logger
	// started closes when the manager's Start is called: before then a
	// read fails at once, as a stock cache's does.
	started <-chan struct{}

	mu      sync.Mutex
	indexes []fieldIndex
	cache   cache.Cache
	ready   chan struct{}
}

type fieldIndex struct {
	obj     client.Object
	field   string
	extract client.IndexerFunc
}

func newDeferredCache(taken, started <-chan struct{}, build func() (cache.Cache, error), log logr.Logger) *deferredCache {
	return &deferredCache{taken: taken, started: started, build: build, log: log, ready: make(chan struct{})}
}

// managerStarted reports whether the manager's Start was called.
func (d *deferredCache) managerStarted() bool {
	select {
	case <-d.started:
		return true
	default:
		return false
	}
}

// Start builds the cache once the snapshot is taken, retrying while the API
// cannot answer, and runs it until ctx ends.
func (d *deferredCache) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-d.taken:
	}
	// A kube-apiserver that has just started answers reads before its
	// discovery serves every CRD's group: the first builds may fail, and
	// are retried.
	var c cache.Cache
	var applied int
	backoff := wait.Backoff{Duration: 100 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 5 * time.Second}
	var quiet quietLog
	for {
		var err error
		if c, applied, err = d.buildOrStop(ctx); err == nil {
			break
		}
		if ctx.Err() != nil {
			return nil
		}
		delay := backoff.Step()
		if failures, ok := quiet.due(err, time.Now()); ok {
			d.log.Info("Cache not built yet; retrying", "failures", failures, "retryIn", delay.String(), "error", err.Error())
		}
		if !sleep(ctx, delay) {
			return nil
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Start(ctx) }()
	// Publish only once the cache serves reads: a read the snapshot released
	// must wait for it, not fail with ErrCacheNotStarted.
	if !c.WaitForCacheSync(ctx) {
		return stopped(ctx, errc)
	}
	d.mu.Lock()
	// Indexes recorded while the cache was being built.
	for _, ix := range d.indexes[applied:] {
		if err := c.IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			d.mu.Unlock()
			return fmt.Errorf("index %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	d.cache = c
	close(d.ready)
	d.mu.Unlock()
	return stopped(ctx, errc)
}

// stopped waits for the cache's Start to return, and once ctx has ended for
// at most cacheStopGrace more. An informer stops in milliseconds, but one
// whose list a just-restarted API server holds (its watch cache still
// initializing) stops only when the server answers, a second later: the
// manager's stop, and the exit that follows a change seen as the API
// returned, does not wait for it. Closing the guard's connections as Start
// returns ends that list, and the informer stops.
func stopped(ctx context.Context, errc <-chan error) error {
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	t := time.NewTimer(cacheStopGrace)
	defer t.Stop()
	select {
	case err := <-errc:
		return err
	case <-t.C:
		return nil
	}
}

// cacheStopGrace is how long a stopping cache gets past the manager's stop.
const cacheStopGrace = 100 * time.Millisecond

// buildOrStop builds the cache, or gives up on the build when ctx ends.
// Building asks the API about every type through discovery, whose requests
// take no context: a frozen API server would hold the manager's stop for
// its whole grace period. The build given up on ends when its request
// does: the guard closes its connections as Start returns, and client-go
// may send the request again on a new connection, which ends by its own
// timeouts.
func (d *deferredCache) buildOrStop(ctx context.Context) (cache.Cache, int, error) {
	type built struct {
		c       cache.Cache
		applied int
		err     error
	}
	done := make(chan built, 1)
	go func() {
		c, applied, err := d.buildWithIndexes(ctx)
		done <- built{c, applied, err}
	}()
	select {
	case b := <-done:
		return b.c, b.applied, b.err
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
}

func (d *deferredCache) buildWithIndexes(ctx context.Context) (cache.Cache, int, error) {
	c, err := d.build()
	if err != nil {
		return nil, 0, fmt.Errorf("build the manager's cache: %w", err)
	}
	d.mu.Lock()
	indexes := d.indexes
	d.mu.Unlock()
	for _, ix := range indexes {
		if err := c.IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			return nil, 0, fmt.Errorf("index %T by %s: %w", ix.obj, ix.field, err)
		}
	}
	return c, len(indexes), nil
}

// built waits for the cache. A built cache is returned even to a caller
// whose context has ended, as the cache itself would serve it: a reconcile
// running while the manager stops must not fail on a select that picked the
// ended context over the ready cache.
func (d *deferredCache) built(ctx context.Context) (cache.Cache, error) {
	select {
	case <-d.ready:
		return d.cache, nil
	default:
	}
	if !d.managerStarted() {
		// Holding a read made before Start would hold, for ever, the
		// caller that is about to call it.
		return nil, &cache.ErrCacheNotStarted{}
	}
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("cache not built yet: %w", ctx.Err())
	case <-d.ready:
		return d.cache, nil
	}
}

// WaitForCacheSync is true at once before the cache is built: no informer
// exists then, and each informer asked for later is waited for by whoever
// asked (a controller's own cache-sync wait).
func (d *deferredCache) WaitForCacheSync(ctx context.Context) bool {
	select {
	case <-d.ready:
		return d.cache.WaitForCacheSync(ctx)
	default:
		return true
	}
}

// IndexField is recorded until the cache is built, then added to it. An
// index of a field already recorded for the same type is the conflict a
// stock cache returns at call time: recorded, it would fail every build.
func (d *deferredCache) IndexField(ctx context.Context, obj client.Object, field string, extract client.IndexerFunc) error {
	d.mu.Lock()
	if d.cache == nil {
		for _, ix := range d.indexes {
			if ix.field == field && reflect.TypeOf(ix.obj) == reflect.TypeOf(obj) {
				d.mu.Unlock()
				return fmt.Errorf("indexer conflict: %T is already indexed by field %q", obj, field)
			}
		}
		d.indexes = append(d.indexes, fieldIndex{obj, field, extract})
		d.mu.Unlock()
		return nil
	}
	d.mu.Unlock()
	return d.cache.IndexField(ctx, obj, field, extract)
}

func (d *deferredCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c, err := d.built(ctx)
	if err != nil {
		return err
	}
	return c.Get(ctx, key, obj, opts...)
}

func (d *deferredCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c, err := d.built(ctx)
	if err != nil {
		return err
	}
	return c.List(ctx, list, opts...)
}

// errInformerBeforeStart is an informer asked for before the manager
// started: a stock cache hands one out at once, and the guarded manager
// has none to hand out until the FeatureGate is read (the cache is built
// from the snapshot). Holding the call would hold, for ever, the Start
// that comes after it; an error says where to ask instead.
var errInformerBeforeStart = errors.New("featuregate: informer asked for before the manager started; the guarded manager builds its cache once the FeatureGate is read: ask for it in Options.Setup, in a Runnable added to the manager, or after Start")

func (d *deferredCache) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if !d.managerStarted() {
		return nil, fmt.Errorf("%w (%T)", errInformerBeforeStart, obj)
	}
	c, err := d.built(ctx)
	if err != nil {
		return nil, err
	}
	return c.GetInformer(ctx, obj, opts...)
}

func (d *deferredCache) GetInformerForKind(ctx context.Context, gvk schema.GroupVersionKind, opts ...cache.InformerGetOption) (cache.Informer, error) {
	if !d.managerStarted() {
		return nil, fmt.Errorf("%w (%s)", errInformerBeforeStart, gvk)
	}
	c, err := d.built(ctx)
	if err != nil {
		return nil, err
	}
	return c.GetInformerForKind(ctx, gvk, opts...)
}

func (d *deferredCache) RemoveInformer(ctx context.Context, obj client.Object) error {
	c, err := d.built(ctx)
	if err != nil {
		return err
	}
	return c.RemoveInformer(ctx, obj)
}
