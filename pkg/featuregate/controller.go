package featuregate

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crsource "sigs.k8s.io/controller-runtime/pkg/source"
)

// reconciler compares the live FeatureGate with the startup snapshot. The
// comparison is the whole decision: there is no memory of events, so the
// first reconcile after the cache syncs catches a change made between the
// initial read and the watch, and the periodic resync catches anything a
// broken watch missed.
type reconciler struct {
	// reader reads the FeatureGate, from the manager's cache.
	reader     client.Reader
	name       string
	comparison *comparison
	resync     time.Duration
	log        logr.Logger
}

// Reconcile reads, compares, acts, returns.
func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	snapshot, ok := r.comparison.startup.Snapshot()
	if !ok {
		return reconcile.Result{RequeueAfter: time.Second}, nil
	}
	if req.Name != r.name {
		return reconcile.Result{}, nil
	}
	fg := &configv1.FeatureGate{}
	if err := r.reader.Get(ctx, req.NamespacedName, fg); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("get FeatureGate %s: %w", req.Name, err)
		}
		// A new process could not read it either: keep the snapshot.
		r.log.Info("FeatureGate deleted; keeping the startup snapshot", "featureGate", req.Name, "startupFeatureSet", snapshot.FeatureSetName())
		note := fmt.Sprintf("FeatureGate %s was deleted; keeping startup feature set %s", req.Name, snapshot.FeatureSetName())
		gone := &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: req.Name}}
		r.comparison.events.record(ctx, reference(gone), corev1.EventTypeWarning, reasonFeatureGateDeleted, "Compare", note)
		return reconcile.Result{RequeueAfter: r.resync}, nil
	}
	if r.comparison.compare(ctx, fg, "reconcile") {
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: r.resync}, nil
}

// controller is the reconciler's controller, to be started behind the
// snapshot: a long API outage at start must not run out its cache-sync
// timeout. It runs on every replica, leader or not.
func (r *reconciler) controller(mgr manager.Manager) (controller.Controller, error) {
	// Every update counts, status-only ones included: the gate lists live in
	// status, so no GenerationChangedPredicate here.
	return guardController(mgr, "featuregate", r, r.log, r.name,
		crsource.Kind(mgr.GetCache(), &configv1.FeatureGate{}, &handler.TypedEnqueueRequestForObject[*configv1.FeatureGate]{}))
}

// guardController is one of the guard's own controllers: unmanaged (the
// guard starts it behind the snapshot), on every replica, reconciling r
// for what watch sees and once for the object name whatever the first list
// holds: an object deleted between the snapshot and the cache sync gives
// the watch no event, and would otherwise go unreported, with no resync
// started.
func guardController(mgr manager.Manager, controllerName string, r reconcile.Reconciler, log logr.Logger, name string, watch crsource.Source) (controller.Controller, error) {
	c, err := controller.NewUnmanaged(controllerName, controller.Options{
		Reconciler:         r,
		NeedLeaderElection: ptr.To(false),
		CacheSyncTimeout:   mgr.GetControllerOptions().CacheSyncTimeout,
		Logger:             log,
		// The guard's controllers are its own, one per guarded manager:
		// a process may build many (a manager per test), and their
		// names must not make the second NewManager fail.
		SkipNameValidation: ptr.To(true),
	})
	if err != nil {
		return nil, err
	}
	if err := c.Watch(watch); err != nil {
		return nil, err
	}
	if err := c.Watch(crsource.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		return nil
	})); err != nil {
		return nil, err
	}
	return c, nil
}
