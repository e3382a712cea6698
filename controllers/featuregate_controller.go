package controllers

import (
	"context"
	"fmt"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// The FeatureGate is only ever read.
// +kubebuilder:rbac:groups=config.openshift.io,resources=featuregates,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// EventSource is the reporting controller of the operator's Events.
const EventSource = "featuregate-operator"

// Event reasons.
const (
	ReasonFeatureGateChanged = "FeatureGateChanged"
	ReasonFeatureGateDeleted = "FeatureGateDeleted"
)

// Snapshots gives the startup snapshot once it exists.
type Snapshots interface {
	Snapshot() (featuregate.Snapshot, bool)
}

// Stopper is asked for a shutdown when the FeatureGate changed.
type Stopper interface {
	Stop(reason string)
}

// FeatureGateReconciler compares the live FeatureGate with the startup
// snapshot, and asks for a shutdown when they differ. The comparison is the
// whole decision: there is no memory of events, so the first reconcile after
// the cache syncs catches a change made between the initial read and the
// watch, and the periodic resync catches anything a broken watch missed.
type FeatureGateReconciler struct {
	// Client reads the FeatureGate, from the manager's cache.
	Client    client.Reader
	Snapshots Snapshots
	Options   featuregate.Options
	Stopper   Stopper
	Recorder  events.EventRecorder
	// Events, when set, writes the FeatureGateChanged Event synchronously
	// before the stop (see comparison).
	Events client.Client
	// ResyncPeriod re-runs the comparison without an event.
	ResyncPeriod time.Duration
}

// Reconcile reads, compares, acts, returns.
func (r *FeatureGateReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	resync := ctrl.Result{RequeueAfter: r.ResyncPeriod}
	snapshot, ok := r.Snapshots.Snapshot()
	if !ok {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	if req.Name != r.Options.ObjectName() {
		return ctrl.Result{}, nil
	}
	fg := &configv1.FeatureGate{}
	if err := r.Client.Get(ctx, req.NamespacedName, fg); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get FeatureGate %s: %w", req.Name, err)
		}
		// A new process could not read it either: keep the snapshot.
		log.Info("FeatureGate deleted; keeping the startup snapshot and running on", "featureGate", req.Name, "startupFeatureSet", snapshot.FeatureSetName())
		r.event(deletedRef(req.Name), corev1.EventTypeWarning, ReasonFeatureGateDeleted,
			"FeatureGate %s was deleted; keeping startup feature set %s", req.Name, snapshot.FeatureSetName())
		return resync, nil
	}
	diff, err := r.comparison().compare(ctx, snapshot, fg, "reconcile")
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("FeatureGate %s: %w", req.Name, err)
	}
	if len(diff) > 0 {
		return ctrl.Result{}, nil
	}
	return resync, nil
}

func (r *FeatureGateReconciler) comparison() comparison {
	return comparison{Options: r.Options, Stopper: r.Stopper, Recorder: r.Recorder, Events: r.Events}
}

func (r *FeatureGateReconciler) event(obj runtime.Object, eventType, reason, note string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, eventType, reason, "Compare", note, args...)
	}
}

// deletedRef stands for a FeatureGate that no longer exists, so that the
// warning is still attached to its name.
func deletedRef(name string) *configv1.FeatureGate {
	fg := &configv1.FeatureGate{ObjectMeta: metav1.ObjectMeta{Name: name}}
	fg.SetGroupVersionKind(configv1.GroupVersion.WithKind("FeatureGate"))
	return fg
}

// SetupWithManager adds the controller to mgr behind startup: it starts once
// the snapshot exists, so a long API outage at start never runs out its
// cache-sync timeout. It runs on every replica, leader or not.
func (r *FeatureGateReconciler) SetupWithManager(mgr manager.Manager, startup *featuregate.Startup, cacheSyncTimeout time.Duration) error {
	c, err := controller.NewUnmanaged("featuregate", controller.Options{
		Reconciler:         r,
		NeedLeaderElection: ptr.To(false),
		CacheSyncTimeout:   cacheSyncTimeout,
		Logger:             mgr.GetLogger(),
		SkipNameValidation: mgr.GetControllerOptions().SkipNameValidation,
	})
	if err != nil {
		return err
	}
	// Every update counts, status-only ones included: the gate lists live in
	// status, so no GenerationChangedPredicate here.
	if err := c.Watch(source.Kind(mgr.GetCache(), &configv1.FeatureGate{}, &handler.TypedEnqueueRequestForObject[*configv1.FeatureGate]{})); err != nil {
		return err
	}
	// One reconcile whatever the first list holds: a FeatureGate deleted
	// between the snapshot and the cache sync gives the watch no event, and
	// would otherwise go unreported, with no resync started.
	name := r.Options.ObjectName()
	if err := c.Watch(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}})
		return nil
	})); err != nil {
		return err
	}
	return mgr.Add(startup.AfterSnapshot(c))
}
