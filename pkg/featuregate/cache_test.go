package featuregate_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// fakeCache records the field indexes added to it. Adding the index named
// hold blocks until release is closed.
type fakeCache struct {
	cache.Cache
	hold    string
	holding chan struct{}
	release chan struct{}

	// startGate, when not nil, holds Start until closed: a real cache
	// serves reads only once its Start has run (the informers' own, in
	// goroutines, for a cache with ByObject entries).
	startGate chan struct{}
	started   atomic.Bool
	startedCh chan struct{}

	mu      sync.Mutex
	indexes []string
}

func (f *fakeCache) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	if !f.started.Load() {
		return &cache.ErrCacheNotStarted{}
	}
	return nil
}

func (f *fakeCache) IndexField(ctx context.Context, _ client.Object, field string, _ client.IndexerFunc) error {
	if field == f.hold {
		close(f.holding)
		select {
		case <-f.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.indexes = append(f.indexes, field)
	return nil
}

func (f *fakeCache) Indexes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.indexes...)
}

func (f *fakeCache) Start(ctx context.Context) error {
	if f.startGate != nil {
		select {
		case <-f.startGate:
		case <-ctx.Done():
			return nil
		}
	}
	f.started.Store(true)
	close(f.startedCh)
	<-ctx.Done()
	return nil
}

// WaitForCacheSync is a real cache's: it waits for Start (and then for
// its informers, which the fake has none of).
func (f *fakeCache) WaitForCacheSync(ctx context.Context) bool {
	select {
	case <-f.startedCh:
		return true
	case <-ctx.Done():
		return false
	}
}

func (f *fakeCache) GetInformer(context.Context, client.Object, ...cache.InformerGetOption) (cache.Informer, error) {
	return nil, nil
}

func byName(o client.Object) []string { return []string{o.GetName()} }

// Nothing is built before the snapshot; reads wait for the cache (bounded
// by their context), and the cache-sync wait does not hold the manager.
func TestDeferredCacheWaitsForTheSnapshot(t *testing.T) {
	g := NewWithT(t)
	taken := make(chan struct{})
	builds := 0
	fake := &fakeCache{startedCh: make(chan struct{})}
	d := featuregate.NewDeferredCache(taken, func() (cache.Cache, error) { builds++; return fake, nil }, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, d.Start)
	t.Cleanup(func() { cancel(); <-done })

	g.Expect(d.IndexField(ctx, &corev1.ConfigMap{}, "before", byName)).To(Succeed())
	g.Expect(d.WaitForCacheSync(ctx)).To(BeTrue())
	short, stop := context.WithTimeout(ctx, 100*time.Millisecond)
	defer stop()
	err := d.Get(short, client.ObjectKey{Name: "x"}, &corev1.ConfigMap{})
	g.Expect(errors.Is(err, context.DeadlineExceeded)).To(BeTrue(), "%v", err)
	g.Expect(builds).To(BeZero())

	close(taken)
	g.Eventually(fake.Indexes).WithTimeout(10 * time.Second).Should(Equal([]string{"before"}))
	g.Expect(d.IndexField(ctx, &corev1.ConfigMap{}, "after", byName)).To(Succeed())
	g.Eventually(fake.Indexes).WithTimeout(10 * time.Second).Should(Equal([]string{"before", "after"}))
	g.Expect(builds).To(Equal(1))
}

// An index registered while the cache is being built (a runnable started
// behind the snapshot may register one) must end up in the cache: IndexField
// said it succeeded.
func TestDeferredCacheKeepsAnIndexAddedDuringTheBuild(t *testing.T) {
	g := NewWithT(t)
	taken := make(chan struct{})
	fake := &fakeCache{hold: "first", holding: make(chan struct{}), release: make(chan struct{}), startedCh: make(chan struct{})}
	d := featuregate.NewDeferredCache(taken, func() (cache.Cache, error) { return fake, nil }, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, d.Start)
	t.Cleanup(func() { cancel(); <-done })

	g.Expect(d.IndexField(ctx, &corev1.ConfigMap{}, "first", byName)).To(Succeed())
	close(taken)
	g.Eventually(fake.holding).WithTimeout(10 * time.Second).Should(BeClosed())
	// The build is applying the indexes recorded so far.
	g.Expect(d.IndexField(ctx, &corev1.ConfigMap{}, "second", byName)).To(Succeed())
	close(fake.release)

	// Wait for the cache to be published: a read through it no longer waits.
	g.Eventually(func() []string { return fake.Indexes() }).WithTimeout(10 * time.Second).Should(ContainElement("first"))
	g.Eventually(func() bool {
		short, stop := context.WithTimeout(ctx, 10*time.Millisecond)
		defer stop()
		_, err := d.GetInformer(short, &corev1.ConfigMap{})
		return !errors.Is(err, context.DeadlineExceeded)
	}).WithTimeout(10 * time.Second).Should(BeTrue())
	g.Expect(fake.Indexes()).To(ConsistOf("first", "second"), "an index IndexField accepted never reached the cache")
}

// "Reads through the cache before then wait for it": a read that the
// snapshot released must not fail because the cache it waited for has not
// started yet. A stock manager starts its caches before any runnable; here
// runnables start with the snapshot, beside the cache's build and start.
func TestDeferredCacheReadsWaitUntilTheCacheServes(t *testing.T) {
	g := NewWithT(t)
	taken := make(chan struct{})
	fake := &fakeCache{startGate: make(chan struct{}), startedCh: make(chan struct{})}
	d := featuregate.NewDeferredCache(taken, func() (cache.Cache, error) { return fake, nil }, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, d.Start)
	t.Cleanup(func() { cancel(); <-done })

	readCtx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	read := runAsync(readCtx, func(ctx context.Context) error {
		return d.Get(ctx, client.ObjectKey{Namespace: "default", Name: "x"}, &corev1.ConfigMap{})
	})
	close(taken)
	// The cache is built; its Start is under way.
	time.Sleep(200 * time.Millisecond)
	close(fake.startGate)
	var err error
	g.Eventually(read).WithTimeout(10 * time.Second).Should(Receive(&err))
	var notStarted *cache.ErrCacheNotStarted
	g.Expect(errors.As(err, &notStarted)).To(BeFalse(), "a read released by the snapshot failed: %v", err)
	g.Expect(err).NotTo(HaveOccurred())
}

// A reconcile still running while the manager stops reads with an ended
// context; a built cache serves it (as a stock manager's cache would), or
// the reconcile logs "Reconciler error" on the way out.
func TestDeferredCacheServesAnEndedContextOnceBuilt(t *testing.T) {
	g := NewWithT(t)
	taken := make(chan struct{})
	fake := &fakeCache{startedCh: make(chan struct{})}
	d := featuregate.NewDeferredCache(taken, func() (cache.Cache, error) { return fake, nil }, logr.Discard())
	ctx, cancel := context.WithCancel(context.Background())
	done := runAsync(ctx, d.Start)
	t.Cleanup(func() { cancel(); <-done })
	close(taken)
	g.Eventually(func() error {
		short, stop := context.WithTimeout(ctx, 10*time.Millisecond)
		defer stop()
		return d.Get(short, client.ObjectKey{Name: "x"}, &corev1.ConfigMap{})
	}).WithTimeout(10 * time.Second).Should(Succeed())

	ended, end := context.WithCancel(ctx)
	end()
	// Each read is a fresh chance for a select between the two to go wrong.
	for range 200 {
		g.Expect(d.Get(ended, client.ObjectKey{Name: "x"}, &corev1.ConfigMap{})).To(Succeed())
	}
}
