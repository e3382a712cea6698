// Command consumer is an operator written the kubebuilder way that adopts
// the FeatureGate guard: it records, in every ConfigMap labelled
// app=consumer in its namespace, the feature set and whether the gate it
// consumes is enabled; it annotates them when its preview gate was enabled
// at startup (a controller that exists only then); and, with
// --decide-bind-address, it answers requests from the same snapshot on
// /decide, asking the guard for each. It is not ready until it has read the
// cluster's FeatureGate, acts only while the guard vouches for that read,
// and exits 0 for a restart as soon as the FeatureGate differs from it.
package main

import (
	"crypto/tls"
	"flag"
	"os"
	"time"

	configv1 "github.com/openshift/api/config/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/featuregate-operator/operator/pkg/featuregate"
)

// flags are the command line; --kubeconfig is controller-runtime's own.
type flags struct {
	probeAddr, decideAddr, version, namespace, gate, previewGate string
	resync, cacheSyncTimeout                                     time.Duration
	// watchedGates is --watched-gates as given: parseGates reads it.
	watchedGates    string
	watchFeatureSet bool
	// metricsAddr and tlsProfileFrom: metrics over HTTPS with the TLS
	// profile of that APIServer.
	metricsAddr, tlsProfileFrom string
	tlsLegacyAdhering           bool
}

func main() {
	var f flags
	flag.StringVar(&f.probeAddr, "health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	flag.StringVar(&f.decideAddr, "decide-bind-address", "0", `Address of /decide, which answers each request from the snapshot only while the guard vouches for it ("0": not served).`)
	flag.StringVar(&f.version, "release-version", "", "Release version whose status.featureGates entry is read; the version marker 0.0.1-snapshot (what a payload substitutes) reads it from the ClusterVersion.")
	flag.StringVar(&f.namespace, "namespace", "default", "Namespace of the ConfigMaps labelled app=consumer.")
	flag.DurationVar(&f.resync, "resync", time.Minute, "How often each ConfigMap is reconciled again.")
	flag.StringVar(&f.gate, "gate", "GateA", "The feature gate this operator consumes.")
	flag.StringVar(&f.previewGate, "preview-gate", "GateB", "The feature gate whose being enabled at startup registers the preview controller.")
	flag.StringVar(&f.watchedGates, "watched-gates", "", "Comma-separated feature gates whose change restarts the operator (empty: every gate of its version's status entry).")
	flag.BoolVar(&f.watchFeatureSet, "watch-feature-set", true, "Restart when spec.featureSet changes too (its decisions report the feature set); false restarts only for gate changes, as library-go does.")
	flag.DurationVar(&f.cacheSyncTimeout, "cache-sync-timeout", 2*time.Minute, "How long a controller may wait for its cache to sync.")
	flag.StringVar(&f.metricsAddr, "metrics-bind-address", "0", `Address of the metrics endpoint, over HTTPS with a self-signed certificate ("0": not served).`)
	flag.StringVar(&f.tlsProfileFrom, "tls-profile-from", "cluster", `The APIServer whose TLS security profile the metrics endpoint serves, read with the FeatureGate ("": not read, Go's defaults).`)
	flag.BoolVar(&f.tlsLegacyAdhering, "tls-legacy-adhering", true, "Honour the TLS profile whatever spec.tlsAdherence says, as a component that honoured it before the policy existed; false: only under StrictAllComponents.")
	// JSON (not kubebuilder's development console): the keys are the story.
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(f); err != nil {
		ctrl.Log.WithName("setup").Error(err, "Stopped with an error")
		os.Exit(1)
	}
}

// run returns nil after a requested stop (the FeatureGate changed) or a
// signal, so that the process exits 0 and its restart reads the new value.
func run(f flags) error {
	ctx := ctrl.SetupSignalHandler()
	guard, err := featuregate.NewGuard(ctrl.GetConfigOrDie(), featuregate.Options{
		Version: f.version, EventSource: "consumer",
		WatchedGates: parseGates(f.watchedGates),
		// Its decisions report the feature set: by default it consumes it.
		WatchFeatureSet: f.watchFeatureSet,
		// Which controllers exist is decided from the snapshot, once read.
		Setup:      setupPreview(configv1.FeatureGateName(f.previewGate)),
		TLSProfile: tlsProfile(f),
	})
	if err != nil {
		return err
	}
	metrics := metricsserver.Options{BindAddress: f.metricsAddr}
	if f.metricsAddr != "0" {
		metrics.SecureServing = true
		if f.tlsProfileFrom != "" {
			// Last: no handshake before the profile is read.
			metrics.TLSOpts = []func(*tls.Config){guard.TLSOpts}
		}
	}
	mgr, err := guard.NewManager(ctrl.Options{
		// Only this operator's own ConfigMaps are cached.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {
			Label:      labels.SelectorFromSet(labels.Set{appLabel: appName}),
			Namespaces: map[string]cache.Config{f.namespace: {}},
		}}},
		Controller:             config.Controller{CacheSyncTimeout: f.cacheSyncTimeout},
		HealthProbeBindAddress: f.probeAddr,
		Metrics:                metrics,
	})
	if err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	r := &ConfigMapReconciler{Client: mgr.GetClient(), Gates: guard, Gate: configv1.FeatureGateName(f.gate), Resync: f.resync}
	if err := r.SetupWithManager(mgr); err != nil {
		return err
	}
	if f.decideAddr != "0" {
		// Per request, not per reconcile: see decider.
		if err := mgr.Add(serveDecisions{addr: f.decideAddr, decider: decider{gates: guard, gate: configv1.FeatureGateName(f.gate)}}); err != nil {
			return err
		}
	}
	if err := mgr.Start(ctx); err != nil {
		return err
	}
	reason, requested := guard.StopReason()
	if !requested {
		reason = "signal"
	}
	ctrl.Log.WithName("setup").Info("Stopped", "reason", reason)
	return nil
}

// tlsProfile opts the guard into the TLS profile when the metrics endpoint
// serves it.
func tlsProfile(f flags) *featuregate.TLSProfileOptions {
	if f.metricsAddr == "0" || f.tlsProfileFrom == "" {
		return nil
	}
	return &featuregate.TLSProfileOptions{APIServer: f.tlsProfileFrom, LegacyAdhering: f.tlsLegacyAdhering}
}
