package featuregate_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/featuregate-operator/operator/pkg/featuregate"
	"github.com/featuregate-operator/operator/pkg/featuregate/featuregatetest"
	"github.com/featuregate-operator/operator/pkg/featuregate/internal/testenv"
)

// Options.Setup decides, from the snapshot, which controllers exist: the
// one behind the enabled gate is registered and reconciles, the one behind
// the disabled gate is not, and Setup runs once, after the snapshot.
func TestGuardSetupRegistersControllersFromTheSnapshot(t *testing.T) {
	g := NewWithT(t)
	ctx := testContext(t)
	c := testClient(t)
	name := uniqueName()
	const version = "4.11.0"

	var mu sync.Mutex
	var calls []featuregate.Snapshot
	var registered []string
	reconciled := make(chan string, 16)
	setup := func(mgr manager.Manager, snap featuregate.Snapshot) error {
		mu.Lock()
		calls = append(calls, snap)
		mu.Unlock()
		for _, gate := range []configv1.FeatureGateName{"GateA", "GateB"} {
			if !snap.Enabled(gate) {
				continue
			}
			mu.Lock()
			registered = append(registered, string(gate))
			mu.Unlock()
			err := ctrl.NewControllerManagedBy(mgr).Named(name+"-"+string(gate)).
				For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == name }))).
				Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
					reconciled <- string(gate)
					return reconcile.Result{}, nil
				}))
			if err != nil {
				return err
			}
		}
		return nil
	}

	gd := newGuard(t, featuregate.Options{Name: name, Version: version, Setup: setup})
	gd.start(t, gd.newManager(t, ctrl.Options{}))
	g.Consistently(func() int { mu.Lock(); defer mu.Unlock(); return len(calls) }).WithTimeout(time.Second).Should(BeZero(),
		"Setup ran without a snapshot")

	testenv.CreateFeatureGate(t, c, featuregatetest.FeatureGate(configv1.Default, featuregatetest.Named(name),
		featuregatetest.StatusGates(version, []string{"GateA"}, []string{"GateB"})))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceDefault}}
	g.Expect(c.Create(ctx, cm)).To(Succeed())
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), cm); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete ConfigMap %s: %v", name, err)
		}
	})

	g.Eventually(reconciled).WithTimeout(time.Minute).Should(Receive(Equal("GateA")))
	g.Consistently(reconciled).WithTimeout(time.Second).ShouldNot(Receive(Equal("GateB")))
	mu.Lock()
	defer mu.Unlock()
	g.Expect(calls).To(HaveLen(1))
	g.Expect(calls[0].Enabled("GateA")).To(BeTrue())
	g.Expect(registered).To(Equal([]string{"GateA"}))
}

// A Setup that fails ends the manager's Start with its error: a bug in the
// adopter's wiring is a crash, not a silent half-built operator.
func TestGuardSetupErrorEndsStart(t *testing.T) {
	g := NewWithT(t)
	c := testClient(t)
	name := uniqueName()
	testenv.CreateFeatureGate(t, c, newFG(name, configv1.Default))
	boom := errors.New("no controller for this feature set")
	gd := newGuard(t, featuregate.Options{Name: name, Setup: func(manager.Manager, featuregate.Snapshot) error { return boom }})
	gd.start(t, gd.newManager(t, ctrl.Options{}))
	var err error
	g.Eventually(gd.done).WithTimeout(time.Minute).Should(Receive(&err))
	g.Expect(errors.Is(err, boom)).To(BeTrue(), "%v", err)
}
