package main

import (
	"context"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// previewAnnotation marks the ConfigMaps the preview controller has seen;
// its value is the gate that brought the controller into being.
const previewAnnotation = "consumer.example.com/preview"

// PreviewReconciler exists only in a process whose startup snapshot has its
// Gate enabled (see setupPreview): the pattern of an operator whose
// controllers are a tech-preview feature. It never asks the gate: being
// registered is the answer.
type PreviewReconciler struct {
	client.Client
	Gate configv1.FeatureGateName
}

// Reconcile annotates each ConfigMap labelled app=consumer.
func (r *PreviewReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, req.NamespacedName, cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cm.Labels[appLabel] != appName || cm.Annotations[previewAnnotation] == string(r.Gate) {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(cm.DeepCopy())
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	cm.Annotations[previewAnnotation] = string(r.Gate)
	return ctrl.Result{}, r.Patch(ctx, cm, patch)
}

// SetupWithManager builds the controller.
func (r *PreviewReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("preview").Complete(r)
}

// setupPreview is the guard's Options.Setup: it runs once the snapshot is
// taken and registers the preview controller only if gate is enabled in
// it. A change of the gate restarts the process, which decides again.
func setupPreview(gate configv1.FeatureGateName) func(manager.Manager, featuregate.Snapshot) error {
	return func(mgr manager.Manager, snap featuregate.Snapshot) error {
		log := ctrl.Log.WithName("setup")
		if !snap.Enabled(gate) {
			log.Info("Preview controller not registered; its gate is disabled", "gate", gate)
			return nil
		}
		log.Info("Preview controller registered", "gate", gate)
		return (&PreviewReconciler{Client: mgr.GetClient(), Gate: gate}).SetupWithManager(mgr)
	}
}
