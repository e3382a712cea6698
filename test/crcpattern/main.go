// Command crcpattern is a model of the TLS-profile pattern that
// openshift/controller-runtime-common's pkg/tls gives operators, as
// cluster-control-plane-machine-set-operator uses it: the APIServer's
// profile fetched once before the manager (an empty profile and policy when
// the fetch fails, which library-go's adherence rule serves as
// Intermediate), a TLSOpts built from it, and a SecurityProfileWatcher controller
// that calls cancel() when the resolved profile or the adherence policy
// differs from the initial one. It is written from that package's
// documented behaviour, not from its code: the Go module proxy does not
// serve github.com/openshift/controller-runtime-common. The e2e test
// TestTLSProfileSideBySide runs it beside examples/consumer, which uses the
// guard, through the same scenarios.
//
// It exits 0 after its watcher cancelled or a signal, 1 on an error.
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"os"
	"reflect"

	configv1 "github.com/openshift/api/config/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func main() {
	name := flag.String("apiserver", "cluster", "The APIServer whose TLS profile is served.")
	metricsAddr := flag.String("metrics-bind-address", ":8443", "Address of the HTTPS metrics endpoint.")
	probeAddr := flag.String("health-probe-bind-address", ":8081", "Address of /healthz and /readyz.")
	opts := zap.Options{}
	opts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&opts)))
	if err := run(*name, *metricsAddr, *probeAddr); err != nil {
		ctrl.Log.WithName("setup").Error(err, "Stopped with an error")
		os.Exit(1)
	}
}

func run(name, metricsAddr, probeAddr string) error {
	log := ctrl.Log.WithName("setup")
	ctx, cancel := context.WithCancel(ctrl.SetupSignalHandler())
	defer cancel()
	cfg := ctrl.GetConfigOrDie()
	scheme := runtime.NewScheme()
	if err := configv1.Install(scheme); err != nil {
		return err
	}

	// Fetched once, before the manager; on failure, as the operator does,
	// an empty profile, and the watcher is relied on to fix it later.
	var initial configv1.APIServer
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	if err := direct.Get(ctx, client.ObjectKey{Name: name}, &initial); err != nil {
		log.Info("Unable to get the TLS profile from the API server; defaulting to an empty profile", "error", err.Error())
	}
	spec, err := resolve(initial.Spec.TLSSecurityProfile)
	if err != nil {
		return err
	}
	if initial.Name == "" {
		spec = configv1.TLSProfileSpec{} // the fetch failed: nothing was read
	}
	adherence := initial.Spec.TLSAdherence
	served := spec
	if !honours(adherence) {
		served = *configv1.TLSProfiles[configv1.TLSProfileIntermediateType]
	}
	log.Info("Serving TLS", "minTLSVersion", served.MinTLSVersion, "adherence", adherence, "read", initial.Name != "")

	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		HealthProbeBindAddress:        probeAddr,
		LeaderElectionReleaseOnCancel: true,
		Metrics: metricsserver.Options{BindAddress: metricsAddr, SecureServing: true,
			TLSOpts: []func(*tls.Config){tlsOpts(served)}},
	})
	if err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	w := &watcher{Client: mgr.GetClient(), name: name, spec: spec, adherence: adherence, changed: func() {
		log.Info("TLS profile changed; cancelling")
		cancel()
	}}
	err = ctrl.NewControllerManagedBy(mgr).Named("tlssecurityprofilewatcher").
		For(&configv1.APIServer{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == name }))).
		WithOptions(controller.Options{NeedLeaderElection: new(bool)}).
		Complete(w)
	if err != nil {
		return err
	}
	if err := mgr.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	log.Info("Stopped")
	return nil
}

// watcher compares the resolved profile and the adherence policy with the
// initial ones, calls changed when they differ, and then takes the new
// values as its initial ones.
type watcher struct {
	client.Client
	name      string
	spec      configv1.TLSProfileSpec
	adherence configv1.TLSAdherencePolicy
	changed   func()
}

func (w *watcher) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var as configv1.APIServer
	if err := w.Get(ctx, req.NamespacedName, &as); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	spec, err := resolve(as.Spec.TLSSecurityProfile)
	if err != nil {
		return reconcile.Result{}, err
	}
	if !reflect.DeepEqual(spec, w.spec) || as.Spec.TLSAdherence != w.adherence {
		w.changed()
		w.spec, w.adherence = spec, as.Spec.TLSAdherence
	}
	return reconcile.Result{}, nil
}

// resolve is the profile's settings: Intermediate when unset or unknown.
func resolve(p *configv1.TLSSecurityProfile) (configv1.TLSProfileSpec, error) {
	if p == nil || p.Type == "" {
		return *configv1.TLSProfiles[configv1.TLSProfileIntermediateType], nil
	}
	if p.Type == configv1.TLSProfileCustomType {
		if p.Custom == nil {
			return configv1.TLSProfileSpec{}, errors.New("custom TLS profile without its spec")
		}
		return p.Custom.TLSProfileSpec, nil
	}
	if s, ok := configv1.TLSProfiles[p.Type]; ok {
		return *s, nil
	}
	return *configv1.TLSProfiles[configv1.TLSProfileIntermediateType], nil
}

// honours is library-go's rule for a component that did not honour the
// profile before the adherence policy: only under a strict (or unknown)
// policy.
func honours(a configv1.TLSAdherencePolicy) bool {
	return a != configv1.TLSAdherencePolicyNoOpinion && a != configv1.TLSAdherencePolicyLegacyAdheringComponentsOnly
}

// tlsOpts serves the minimum version (an empty one is TLS 1.2): the side by
// side compares versions, not suites.
func tlsOpts(s configv1.TLSProfileSpec) func(*tls.Config) {
	versions := map[configv1.TLSProtocolVersion]uint16{
		configv1.VersionTLS10: tls.VersionTLS10, configv1.VersionTLS11: tls.VersionTLS11,
		configv1.VersionTLS12: tls.VersionTLS12, configv1.VersionTLS13: tls.VersionTLS13,
	}
	return func(c *tls.Config) {
		c.MinVersion = tls.VersionTLS12
		if v, ok := versions[s.MinTLSVersion]; ok {
			c.MinVersion = v
		}
	}
}
