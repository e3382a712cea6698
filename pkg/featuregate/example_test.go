package featuregate_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	"github.com/openshift/api/features"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// An operator's main: the guard builds the manager, everything added to it
// starts once the startup snapshot is taken, and a requested stop (the
// FeatureGate changed) ends Start with nil: the process exits 0 and the
// kubelet answers with a fresh process, which reads the new value.
func Example() {
	log := ctrl.Log.WithName("setup")
	guard, err := featuregate.NewGuard(ctrl.GetConfigOrDie(), featuregate.Options{
		Version:     "4.18.0",
		EventSource: "example-operator",
	})
	if err != nil {
		log.Error(err, "FeatureGate guard")
		os.Exit(1)
	}
	mgr, err := guard.NewManager(ctrl.Options{HealthProbeBindAddress: ":8081"})
	if err != nil {
		log.Error(err, "manager")
		os.Exit(1)
	}
	// The guard answers /readyz/featuregate itself.
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		log.Error(err, "health check")
		os.Exit(1)
	}
	if err := ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(&configMapReconciler{
		client: mgr.GetClient(),
		gates:  guard,
	}); err != nil {
		log.Error(err, "ConfigMap controller")
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager")
		os.Exit(1)
	}
	if reason, requested := guard.StopReason(); requested {
		log.Info("Restarting to read the new feature set", "reason", reason)
	}
	os.Exit(0)
}

// configMapReconciler acts on the feature set. It depends on
// featuregate.Gates, not on *featuregate.Guard, so that its unit tests can
// give it a featuregatetest.Gates.
type configMapReconciler struct {
	client client.Client
	gates  featuregate.Gates
}

func (r *configMapReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cm := &corev1.ConfigMap{}
	if err := r.client.Get(ctx, req.NamespacedName, cm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Act as the gate says, on cm: here both states write, so the write
	// asks either way.
	cm.Data = map[string]string{"example": "disabled"}
	if r.gates.Enabled(features.FeatureGateExample) {
		cm.Data["example"] = "enabled"
	}
	// The last look, right before the write: while the guard cannot vouch
	// that the FeatureGate still matches the snapshot (an API outage, a
	// change found and the manager stopping), wait rather than act.
	if !r.gates.Current() {
		return ctrl.Result{RequeueAfter: time.Second}, nil
	}
	return ctrl.Result{}, r.client.Update(ctx, cm)
}

// A reconciler checks Current before each action and requeues when the
// guard cannot vouch for its snapshot; it is given the guard as its Gates.
func ExampleGuard_Current() {
	var guard *featuregate.Guard // from featuregate.NewGuard
	var mgr ctrl.Manager         // from guard.NewManager
	if err := ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(&configMapReconciler{
		client: mgr.GetClient(),
		gates:  guard,
	}); err != nil {
		os.Exit(1)
	}
}

// A controller that exists only when its gate is enabled is registered in
// Options.Setup, from the snapshot: before the snapshot every gate reads as
// disabled. A change of the gate restarts the process, which decides again.
func ExampleOptions_setup() {
	var guard *featuregate.Guard // set below, before Setup can run
	guard, err := featuregate.NewGuard(ctrl.GetConfigOrDie(), featuregate.Options{
		Version:     "4.18.0",
		EventSource: "example-operator",
		Setup: func(mgr manager.Manager, snap featuregate.Snapshot) error {
			if !snap.Enabled(features.FeatureGateExample) {
				return nil
			}
			return ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Complete(&configMapReconciler{
				client: mgr.GetClient(),
				gates:  guard, // still asked Current before each write
			})
		},
	})
	if err != nil {
		os.Exit(1)
	}
	mgr, err := guard.NewManager(ctrl.Options{})
	if err != nil {
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		os.Exit(1)
	}
}

// The guard's Events recorded through the operator's own recorder, built
// before the guard (the manager's own exists only after NewManager).
func ExampleOptions_eventRecorder() {
	ctx := ctrl.SetupSignalHandler() // once per process: mgr.Start gets it too
	cfg := ctrl.GetConfigOrDie()
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: kubernetes.NewForConfigOrDie(cfg).EventsV1()})
	broadcaster.StartRecordingToSink(ctx.Done())
	defer broadcaster.Shutdown()
	guard, err := featuregate.NewGuard(cfg, featuregate.Options{
		Version:       "4.18.0",
		EventRecorder: broadcaster.NewRecorder(scheme.Scheme, "example-operator"),
	})
	if err != nil {
		os.Exit(1)
	}
	mgr, err := guard.NewManager(ctrl.Options{})
	if err != nil {
		os.Exit(1)
	}
	if err := mgr.Start(ctx); err != nil {
		os.Exit(1)
	}
}

// The cluster's TLS security profile in the snapshot: the metrics and
// webhook servers serve it through TLSOpts, which fails every handshake
// until it is read; a change of what is served restarts the process as a
// FeatureGate change does.
func ExampleGuard_TLSOpts() {
	guard, err := featuregate.NewGuard(ctrl.GetConfigOrDie(), featuregate.Options{
		Version:     "4.22.0",
		EventSource: "example-operator",
		// MicroShift serves no APIServer: name what to serve there, or
		// leave Absent nil to wait, not ready.
		TLSProfile: &featuregate.TLSProfileOptions{APIServer: "cluster"},
	})
	if err != nil {
		os.Exit(1)
	}
	tlsOpts := []func(*tls.Config){guard.TLSOpts} // last, after any of your own
	mgr, err := guard.NewManager(ctrl.Options{
		HealthProbeBindAddress: ":8081",
		Metrics:                metricsserver.Options{BindAddress: ":8443", SecureServing: true, TLSOpts: tlsOpts},
		WebhookServer:          webhook.NewServer(webhook.Options{Port: 9443, TLSOpts: tlsOpts}),
	})
	if err != nil {
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		os.Exit(1)
	}
	if snap, ok := guard.Snapshot(); ok {
		if p, ok := snap.TLSProfile(); ok {
			ctrl.Log.Info("Served", "tlsProfile", p.String())
		}
	}
}

// A component without a controller-runtime manager runs the guard's core
// itself: its /readyz answers the guard's Check, its own work acts only
// while Current is true and stops at StopRequested, and Run returns nil
// once the guard asked for the stop.
func ExampleGuard_Run() {
	log := ctrl.Log.WithName("setup")
	guard, err := featuregate.NewGuard(ctrl.GetConfigOrDie(), featuregate.Options{
		Version:     "4.18.0",
		EventSource: "example-component",
	})
	if err != nil {
		log.Error(err, "FeatureGate guard")
		os.Exit(1)
	}
	http.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := guard.Check(r); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	go func() { _ = http.ListenAndServe(":8081", nil) }() //nolint:gosec // an example
	ctx := ctrl.SetupSignalHandler()
	go func() {
		for {
			select {
			case <-guard.StopRequested():
				return
			case <-time.After(time.Second):
			}
			if guard.Current() && guard.Enabled(features.FeatureGateExample) {
				log.Info("Acting on a feature set read and still current")
			}
		}
	}()
	if err := guard.Run(ctx); err != nil {
		log.Error(err, "FeatureGate guard")
		os.Exit(1)
	}
	if reason, requested := guard.StopReason(); requested {
		log.Info("Restarting to read the new feature set", "reason", reason)
	}
}

// An operator that consumes the Infrastructure's topology, as many
// OpenShift operators do (a single-replica control plane runs one replica
// of this, a highly available one three): the topology is part of the
// snapshot. The guard is not ready until it is read; a change of the
// topology stops the manager, as a FeatureGate change does; a change of any
// other field of the Infrastructure does not; Current vouches for it.
// Without a config.openshift.io API (MicroShift) the fallback is held; an
// Infrastructure that appears later with another topology restarts.
func ExampleNewPart() {
	log := ctrl.Log.WithName("setup")
	type topology struct {
		controlPlane, infrastructure configv1.TopologyMode
	}
	infra, err := featuregate.NewPart("cluster", func(i *configv1.Infrastructure) topology {
		return topology{i.Status.ControlPlaneTopology, i.Status.InfrastructureTopology}
	}, featuregate.PartOptions[topology]{
		Absent: &topology{configv1.SingleReplicaTopologyMode, configv1.SingleReplicaTopologyMode},
	})
	if err != nil {
		log.Error(err, "Infrastructure part")
		os.Exit(1)
	}
	guard, err := featuregate.NewGuard(ctrl.GetConfigOrDie(), featuregate.Options{
		EventSource: "example-operator",
		Parts:       []featuregate.Part{infra},
	})
	if err != nil {
		log.Error(err, "guard")
		os.Exit(1)
	}
	mgr, err := guard.NewManager(ctrl.Options{HealthProbeBindAddress: ":8081"})
	if err != nil {
		log.Error(err, "manager")
		os.Exit(1)
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		// Added runnables start once the snapshot is taken: the
		// topology is there.
		s, _ := guard.Snapshot()
		t, _ := infra.Value(s)
		replicas := 3
		if t.controlPlane == configv1.SingleReplicaTopologyMode {
			replicas = 1
		}
		log.Info("Operands sized by the control plane's topology", "replicas", replicas)
		<-ctx.Done()
		return nil
	})); err != nil {
		log.Error(err, "runnable")
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "manager")
		os.Exit(1)
	}
}
