package featuregate

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"
)

// tlsReconciler compares the live APIServer's TLS profile with the
// snapshot's, level-triggered as the FeatureGate's reconciler is: the first
// reconcile after the cache syncs catches a change made since the startup
// read, the resync what a broken watch missed. The object is read
// unstructured, so that its groups survive.
type tlsReconciler struct {
	reader     client.Reader
	src        *tlsSource
	comparison *tlsComparison
	resync     time.Duration
	log        logr.Logger
}

func newAPIServerObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(configv1.GroupVersion.WithKind("APIServer"))
	return u
}

// Reconcile reads, compares, acts, returns.
func (r *tlsReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	if req.Name != r.src.name {
		return reconcile.Result{}, nil
	}
	u := newAPIServerObject()
	var live TLSProfile
	err := r.reader.Get(ctx, req.NamespacedName, u)
	switch {
	case apierrors.IsNotFound(err):
		live, err = r.src.whenAbsent(fmt.Errorf("APIServer %s %w", req.Name, errNotFound))
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("get APIServer %s: %w", req.Name, err)
	default:
		live, err = r.src.resolve(u.Object)
	}
	if r.comparison.compare(ctx, live, err, "reconcile") {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: r.resync}, nil
}

// controller is the reconciler's controller, started behind the snapshot,
// on every replica, and only when the cluster serves the APIServer API (an
// informer of a type not served never syncs).
func (r *tlsReconciler) controller(mgr manager.Manager) (controller.Controller, error) {
	named := predicate.NewTypedPredicateFuncs(func(u *unstructured.Unstructured) bool { return u.GetName() == r.src.name })
	return guardController(mgr, "tlsprofile", r, r.log, r.src.name,
		crsource.Kind(mgr.GetCache(), newAPIServerObject(), &handler.TypedEnqueueRequestForObject[*unstructured.Unstructured]{}, named))
}

// whenServed runs r unless the startup read found no APIServer API; then
// it waits for the stop, and the prover's reads, while asked, are what
// would see the API arrive.
type whenServed struct {
	src      *tlsSource
	runnable manager.Runnable
}

func (w whenServed) NeedLeaderElection() bool { return false }

func (w whenServed) Start(ctx context.Context) error {
	if w.src.notServed.Load() {
		<-ctx.Done()
		return nil
	}
	return w.runnable.Start(ctx)
}
