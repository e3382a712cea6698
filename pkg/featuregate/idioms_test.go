package featuregate_test

import (
	"context"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
)

// The ways real operators act through a stock manager, tried on the guarded
// one with the API server down at start and then the FeatureGate absent:
// nothing they write lands before the startup snapshot.
//
//   - cluster-dns-operator's loop: a goroutine that waits for the cache
//     (mgr.GetCache().WaitForCacheSync) and then creates its object
//     through mgr.GetClient(), retrying;
//   - a goroutine that writes through mgr.GetClient() at once, retrying;
//   - a goroutine that waits for mgr.Elected() and then writes;
//   - a write from main before mgr.Start, which fails at once rather than
//     block the Start it comes before.
func TestGuardHoldsEveryAdopterIdiomUntilTheSnapshot(t *testing.T) {
	g := NewWithT(t)
	cp := sharedControlPlane(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()

	configMap := func(idiom string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + idiom, Namespace: metav1.NamespaceDefault,
			Labels: map[string]string{"featuregate-idiom": name}}}
	}
	t.Cleanup(func() { // after the API server is started again
		for _, idiom := range []string{"dns-loop", "direct", "elected", "main"} {
			if err := c.Delete(context.Background(), configMap(idiom)); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete ConfigMap: %v", err)
			}
		}
	})
	start := stopAPIServer(t, cp)
	gd := newGuard(t, featuregate.Options{Name: name})
	mgr := gd.newManager(t, ctrl.Options{})

	// From main, before Start.
	err := mgr.GetClient().Create(ctx, configMap("main"))
	g.Expect(err).To(MatchError(ContainSubstring("before the manager started")))

	// passed records, per idiom, whether the snapshot was taken when its
	// wait ended, before it wrote.
	var mu sync.Mutex
	passed := map[string]bool{}
	pass := func(idiom string) {
		_, taken := gd.guard.Snapshot()
		mu.Lock()
		defer mu.Unlock()
		passed[idiom] = taken
	}
	createUntilDone := func(cm *corev1.ConfigMap) {
		for ctx.Err() == nil {
			err := mgr.GetClient().Create(ctx, cm.DeepCopy())
			if err == nil || apierrors.IsAlreadyExists(err) {
				return
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	ctx, cancel := context.WithCancel(ctx)
	t.Cleanup(cancel) // before the wait
	wg.Add(3)
	go func() {
		defer wg.Done()
		if mgr.GetCache().WaitForCacheSync(ctx) {
			pass("dns-loop")
			createUntilDone(configMap("dns-loop"))
		}
	}()
	go func() {
		defer wg.Done()
		createUntilDone(configMap("direct"))
	}()
	go func() {
		defer wg.Done()
		select {
		case <-mgr.Elected():
			pass("elected")
			createUntilDone(configMap("elected"))
		case <-ctx.Done():
		}
	}()
	gd.start(t, mgr)

	written := func() ([]string, error) {
		list := &corev1.ConfigMapList{}
		err := c.List(ctx, list, client.InNamespace(metav1.NamespaceDefault), client.MatchingLabels{"featuregate-idiom": name})
		var names []string
		for _, cm := range list.Items {
			names = append(names, cm.Name)
		}
		return names, err
	}
	taken := func() bool { _, ok := gd.guard.Snapshot(); return ok }
	g.Consistently(taken).WithTimeout(2 * time.Second).Should(BeFalse())
	start()
	apiReady(t, cp.Config)
	// The API is back, the FeatureGate still absent: a stock manager's
	// idioms would write now.
	g.Consistently(written).WithTimeout(3*time.Second).Should(BeEmpty(), "written before the snapshot")
	mu.Lock()
	g.Expect(passed).To(BeEmpty(), "a wait ended before the snapshot")
	mu.Unlock()

	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	gd.taken(t)
	g.Eventually(written).WithTimeout(time.Minute).Should(ConsistOf(name+"-dns-loop", name+"-direct", name+"-elected"))
	mu.Lock()
	defer mu.Unlock()
	g.Expect(passed).To(Equal(map[string]bool{"dns-loop": true, "elected": true}))
}

// Once a stop is requested, writes through the manager's client are
// refused: work started after the change would act on the old feature set.
func TestGuardRefusesWritesOnceStopping(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	gd := newGuard(t, featuregate.Options{Name: name})
	mgr := gd.newManager(t, ctrl.Options{})
	gd.start(t, mgr)
	gd.current(t)

	specUpdate(toTechPreview).apply(ctx, t, c, name)
	gd.stopRequested(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault}}
	g.Expect(mgr.GetClient().Create(ctx, cm)).To(MatchError(ContainSubstring("the manager is stopping")))
	g.Expect(mgr.GetClient().Status().Update(ctx, cm)).To(MatchError(ContainSubstring("the manager is stopping")))
	g.Expect(apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(cm), &corev1.ConfigMap{}))).To(BeTrue())
}

// Nothing outside the process can see readiness without a probe address:
// the guard says so when the manager is built.
func TestGuardSaysWhenReadinessIsNotServed(t *testing.T) {
	g := NewWithT(t)
	unserved := testenv.Message("Readiness not served")
	gd := newGuard(t, featuregate.Options{Name: uniqueName()})
	gd.newManager(t, ctrl.Options{}) // probe address "0"
	g.Expect(gd.log.CountWhere(unserved)).To(Equal(1))

	gd = newGuard(t, featuregate.Options{Name: uniqueName()})
	gd.newManager(t, ctrl.Options{HealthProbeBindAddress: testenv.FreeAddr(t)})
	g.Expect(gd.log.CountWhere(unserved)).To(BeZero())
}
