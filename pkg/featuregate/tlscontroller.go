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
	reader client.Reader
	part   *tlsPart
	// snapshot is the startup snapshot, once taken.
	snapshot func() (Snapshot, bool)
	resync   time.Duration
	log      logr.Logger
}

func newAPIServerObject() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(configv1.GroupVersion.WithKind("APIServer"))
	return u
}

// Reconcile reads, compares, acts, returns.
func (r *tlsReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	snapshot, ok := r.snapshot()
	held := snapshot.tlsProfile()
	if !ok || held == nil || req.Name != r.part.name {
		return reconcile.Result{}, nil
	}
	u := newAPIServerObject()
	var live TLSProfile
	err := r.reader.Get(ctx, req.NamespacedName, u)
	switch {
	case apierrors.IsNotFound(err):
		live, err = r.part.whenAbsent(fmt.Errorf("APIServer %s %w", req.Name, errNotFound))
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("get APIServer %s: %w", req.Name, err)
	default:
		live, err = r.part.resolve(u.Object)
	}
	if r.part.compare(ctx, *held, live, err, "reconcile") {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: r.resync}, nil
}

// controller is the part's controller under a manager, started behind the
// snapshot and the cache, on every replica, and only when the cluster
// serves the APIServer API (an informer of a type not served never syncs).
func (t *tlsPart) controller(g *Guard, mgr manager.Manager) (manager.Runnable, error) {
	r := &tlsReconciler{reader: mgr.GetCache(), part: t, snapshot: g.Snapshot, resync: g.opts.ResyncPeriod, log: g.opts.Logger}
	named := predicate.NewTypedPredicateFuncs(func(u *unstructured.Unstructured) bool { return u.GetName() == t.name })
	c, err := guardController(mgr, "tlsprofile", r, r.log, t.name,
		crsource.Kind(mgr.GetCache(), newAPIServerObject(), &handler.TypedEnqueueRequestForObject[*unstructured.Unstructured]{}, named))
	if err != nil {
		return nil, fmt.Errorf("TLS profile controller: %w", err)
	}
	return whenServed{src: t, runnable: c}, nil
}

// whenServed runs r unless the startup read found no APIServer API; then
// it waits for the stop, and the prover's reads, while asked, are what
// would see the API arrive.
type whenServed struct {
	src      *tlsPart
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
