package featuregate_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
)

// configMapRecorder is an operator's reconciler: it records the ConfigMaps
// it reconciled and those its field index found.
type configMapRecorder struct {
	client client.Client
	field  string

	mu         sync.Mutex
	reconciled map[string]bool
	indexed    map[string]bool
	errs       []error
}

func (r *configMapRecorder) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cm := &corev1.ConfigMap{}
	if err := r.client.Get(ctx, req.NamespacedName, cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	list := &corev1.ConfigMapList{}
	err := r.client.List(ctx, list, client.InNamespace(req.Namespace), client.MatchingFields{r.field: cm.Data["owner"]})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reconciled[req.Name] = true
	if err != nil {
		r.errs = append(r.errs, err)
		return ctrl.Result{}, err
	}
	for _, item := range list.Items {
		r.indexed[item.Name] = true
	}
	return ctrl.Result{}, nil
}

func (r *configMapRecorder) seen(name string) (reconciled, indexed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reconciled[name], r.indexed[name]
}

func (r *configMapRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.reconciled)
}

// readyz is the manager's /readyz/<check>, as "<status> <body>".
func readyz(addr, check string) func() string {
	hc := &http.Client{Timeout: time.Second}
	return func() string {
		resp, err := hc.Get("http://" + addr + "/readyz/" + check)
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return fmt.Sprintf("%d %s", resp.StatusCode, body)
	}
}

// An operator written the kubebuilder way, started while the API server is
// down: a Cache.ByObject entry and a field index for its own type, and a
// controller built with the builder. The manager builds and starts, says it
// is not ready and why, holds its controller (and what else was added)
// past the controller's cache-sync timeout, and once the API is back takes
// the snapshot, builds the cache with the entry and the index, and
// reconciles.
func TestGuardNewManagerWhileAPIIsDown(t *testing.T) {
	g := NewWithT(t)
	cp := sharedControlPlane(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))

	start := stopAPIServer(t, cp)
	gd := newGuard(t, featuregate.Options{Name: name, CacheSyncTimeout: 3 * time.Second})
	probe := testenv.FreeAddr(t)
	mgr := gd.newManager(t, ctrl.Options{
		HealthProbeBindAddress: probe,
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{"featuregate-test": name})},
		}},
	})
	const field = "data.owner"
	g.Expect(mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, field, func(o client.Object) []string {
		return []string{o.(*corev1.ConfigMap).Data["owner"]}
	})).To(Succeed())
	rec := &configMapRecorder{client: mgr.GetClient(), field: field, reconciled: map[string]bool{}, indexed: map[string]bool{}}
	g.Expect(ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(rec)).To(Succeed())
	var added atomic.Bool
	g.Expect(mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		added.Store(true)
		<-ctx.Done()
		return nil
	}))).To(Succeed())
	gd.start(t, mgr)

	// Not ready, saying why, while the probes answer.
	g.Eventually(readyz(probe, featuregate.CheckName)).WithTimeout(30 * time.Second).Should(And(
		HavePrefix("500 "), ContainSubstring("initial FeatureGate not read yet"), ContainSubstring("connection refused")))
	// Past the controller's cache-sync timeout: nothing failed, nothing
	// started.
	g.Consistently(gd.done).WithTimeout(5*time.Second).ShouldNot(Receive(), "the manager ended while the API was down")
	g.Expect(added.Load()).To(BeFalse(), "a runnable started before the snapshot")
	g.Expect(rec.count()).To(BeZero())
	g.Expect(readyz(probe, featuregate.CheckName)()).To(HavePrefix("500 "))
	_, ok := gd.guard.Snapshot()
	g.Expect(ok).To(BeFalse())

	start()
	for _, cm := range []*corev1.ConfigMap{
		// Outside the cache's ByObject selector: never seen.
		{ObjectMeta: metav1.ObjectMeta{Name: name + "-other", Namespace: metav1.NamespaceDefault}, Data: map[string]string{"owner": name}},
		{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, Labels: map[string]string{"featuregate-test": name}},
			Data: map[string]string{"owner": name}},
	} {
		g.Eventually(func() error { return c.Create(ctx, cm) }).WithTimeout(30 * time.Second).Should(Succeed())
		t.Cleanup(func() {
			if err := c.Delete(context.Background(), cm); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete ConfigMap %s: %v", cm.Name, err)
			}
		})
	}
	g.Eventually(func() bool { reconciled, _ := rec.seen(name); return reconciled }).WithTimeout(time.Minute).Should(BeTrue(),
		"the controller never reconciled the ConfigMap")
	g.Eventually(func() bool { _, indexed := rec.seen(name); return indexed }).WithTimeout(time.Minute).Should(BeTrue(),
		"the field index registered before Start did not find the ConfigMap")
	reconciled, indexed := rec.seen(name + "-other")
	g.Expect(reconciled).To(BeFalse(), "the cache ignored Cache.ByObject")
	g.Expect(indexed).To(BeFalse(), "the cache ignored Cache.ByObject")
	g.Eventually(readyz(probe, featuregate.CheckName)).WithTimeout(30 * time.Second).Should(HavePrefix("200 "))
	g.Expect(added.Load()).To(BeTrue())
	gd.current(t)
	gd.noStop(t)
	g.Expect(gd.done).NotTo(Receive(), "the manager stopped")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	g.Expect(rec.errs).To(BeEmpty())
}

// Building the cache asks discovery whether each Cache.ByObject type is
// namespaced, and an API server that has just returned can take seconds to
// answer that (see TestGuardNewManagerWhileAPIIsDown's flakes): the cache's
// build must not eat the controllers' cache-sync timeout, as it never does
// with a stock manager, which builds its cache before starting anything.
// The build is held here past that timeout.
func TestGuardControllersWaitForTheCacheBuild(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))

	gd := newGuard(t, featuregate.Options{Name: name, CacheSyncTimeout: time.Second})
	release := make(chan struct{})
	var releaseOnce sync.Once
	mgr := gd.newManager(t, ctrl.Options{
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{"featuregate-test": name})},
		}},
		NewCache: func(cfg *rest.Config, o cache.Options) (cache.Cache, error) {
			select { // discovery held by a starting API server
			case <-release:
			case <-time.After(time.Minute):
			}
			return cache.New(cfg, o)
		},
	})
	rec := &configMapRecorder{client: mgr.GetClient(), field: "unused", reconciled: map[string]bool{}, indexed: map[string]bool{}}
	g.Expect(mgr.GetFieldIndexer().IndexField(ctx, &corev1.ConfigMap{}, "unused", func(client.Object) []string { return nil })).To(Succeed())
	g.Expect(ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(rec)).To(Succeed())
	// stopping is set once the manager stops its runnables.
	var stopping atomic.Bool
	g.Expect(mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		<-ctx.Done()
		stopping.Store(true)
		return nil
	}))).To(Succeed())
	gd.start(t, mgr)
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before the manager stops
	gd.taken(t)

	// The build is held for five times the controller's cache-sync timeout.
	g.Consistently(stopping.Load).WithTimeout(5*time.Second).Should(BeFalse(), "the manager stopped while its cache was being built")
	releaseOnce.Do(func() { close(release) })
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault, Labels: map[string]string{"featuregate-test": name}}}
	g.Expect(c.Create(ctx, cm)).To(Succeed())
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), cm); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete ConfigMap %s: %v", cm.Name, err)
		}
	})
	g.Eventually(func() bool { reconciled, _ := rec.seen(name); return reconciled }).WithTimeout(time.Minute).Should(BeTrue())
	gd.noStop(t)
}
