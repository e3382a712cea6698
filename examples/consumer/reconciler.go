package main

import (
	"context"
	"maps"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

const (
	// appLabel=appName marks the ConfigMaps this operator owns.
	appLabel = "app"
	appName  = "consumer"
	// featureSetKey is the data key the snapshot's feature set is written to;
	// the gate's own name is the key of its state.
	featureSetKey = "featureSet"
	// notCurrentRetry is how soon a ConfigMap is looked at again while the
	// guard cannot vouch for its snapshot.
	notCurrentRetry = time.Second
)

// ConfigMapReconciler writes the feature set and the state of Gate into each
// ConfigMap labelled app=consumer. It depends on featuregate.Gates, not on
// the guard, so that its unit tests give it featuregatetest.Gates.
//
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;patch
type ConfigMapReconciler struct {
	client.Client
	Gates featuregate.Gates
	Gate  configv1.FeatureGateName
	// Resync is how soon a ConfigMap that was acted on is reconciled again.
	Resync time.Duration
}

// Reconcile acts on the snapshot only while the guard vouches for it: a
// snapshot that may be stale is a reason to wait, never to act.
func (r *ConfigMapReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, req.NamespacedName, cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cm.Labels[appLabel] != appName {
		return ctrl.Result{}, nil
	}
	if !r.Gates.Current() {
		log.Info("FeatureGate not current; waiting")
		return ctrl.Result{RequeueAfter: notCurrentRetry}, nil
	}
	snapshot, _ := r.Gates.Snapshot() // taken: Current says so
	enabled := r.Gates.Enabled(r.Gate)
	want := map[string]string{featureSetKey: snapshot.FeatureSetName(), string(r.Gate): state(enabled)}
	if !contains(cm.Data, want) {
		patch := client.MergeFrom(cm.DeepCopy())
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		maps.Copy(cm.Data, want)
		if err := r.Patch(ctx, cm, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	log.Info("Acted on the feature set", "configMap", req.String(),
		"featureSet", snapshot.FeatureSetName(), "gate", r.Gate, "enabled", enabled)
	return ctrl.Result{RequeueAfter: r.Resync}, nil
}

// SetupWithManager builds the controller. With the guard's manager it
// starts once the startup snapshot is taken.
func (r *ConfigMapReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("configmap").Complete(r)
}

func state(enabled bool) string {
	if enabled {
		return "enabled"
	}
	return "disabled"
}

// contains reports whether data holds every key of want with its value.
func contains(data, want map[string]string) bool {
	for k, v := range want {
		if got, ok := data[k]; !ok || got != v {
			return false
		}
	}
	return true
}
